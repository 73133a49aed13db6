//! Crafted and careless input, black box: every refusal is a 4xx document
//! with a machine-readable code in its API's format, writes nothing, and the
//! daemon never panics.

mod common;

use chrono::{DateTime, Duration, DurationRound, Utc};
use common::Server;
use reqwest::StatusCode;
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ALICE: &str = "alice:p1";

/// `h` hours after a future hour boundary, in Blazar's input format.
fn at(h: i64) -> String {
    let base: DateTime<Utc> = (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap();
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

async fn enrol(s: &Server, name: &str) {
    let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
}

fn host_lease(name: &str, start: &str, end: &str) -> Value {
    json!({
        "name": name, "start_date": start, "end_date": end,
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}],
    })
}

/// The log's length: what the daemon has written, all told.
async fn log_length(s: &Server) -> usize {
    let (st, body) = s.get("/v1/log?limit=10000", ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["entries"].as_array().unwrap().len()
}

/// A Blazar refusal: the status, Blazar's document and a Berth code.
fn assert_blazar_refusal(st: StatusCode, body: &Value, want: StatusCode, code: &str, what: &str) {
    assert_eq!(st, want, "{what}: {body}");
    assert_eq!(body["error_code"], want.as_u16(), "{what}: {body}");
    assert_eq!(body["code"], code, "{what}: {body}");
    assert!(body["error_message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    assert!(body["request_id"].as_str().is_some_and(|m| m.starts_with("req-")), "{what}: {body}");
}

#[tokio::test]
async fn dates_outside_years_1_to_9999_are_400_and_write_nothing() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let (st, far) = s.post("/v1/leases", ALICE, host_lease("far", "9999-12-30 00:00", "9999-12-31 00:00")).await;
    assert_eq!(st, StatusCode::CREATED, "{far}");
    let far = far["lease"]["id"].as_str().unwrap().to_string();
    let before = log_length(&s).await;
    const CODE: &str = "berth.lease.invalid_date";

    for (start, end) in [
        (at(1), "+262142-12-31 00:00".to_string()),
        ("-262143-01-01 00:00".to_string(), at(2)),
        (at(1), "10000-01-01 00:00".to_string()),
        (at(1), "9999-12-31T23:30:00-01:00".to_string()),
    ] {
        let (st, e) = s.post("/v1/leases", ALICE, host_lease("x", &start, &end)).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, &format!("{start} to {end}"));
    }
    // A recurrence from year -262143, and one whose occurrence would end past 9999.
    for (start, until, duration) in
        [("-262143-01-01 00:00", "2030-01-01 00:00", "1h"), ("9999-12-31 08:00", "9999-12-31 23:00", "100w")]
    {
        let body = json!({"name": "rec", "start_date": start,
            "recurrence": {"cron": "0 9 * * *", "duration": duration, "until": until},
            "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
        let (st, e) = s.post("/v1/leases", ALICE, body).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{start}: {e}");
        assert!(e["code"].as_str().unwrap().starts_with("berth.lease."), "{e}");
    }
    // Advice over a range at the ends of time.
    for body in [
        json!({"reservations": [], "duration": "1h", "from": "-262143-01-01 00:00"}),
        json!({"reservations": [], "duration": "1h", "until": "+262142-12-31 00:00"}),
        json!({"reservations": [], "duration": "100w", "from": "9999-12-31 00:00", "until": "9999-12-31 23:00"}),
    ] {
        let (st, e) = s.post("/v1/availability", ALICE, body.clone()).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, &body.to_string());
    }
    // Moving the far lease's end past 9999, and asking how far it may go.
    for body in [json!({"prolong_for": "100w"}), json!({"defer_by": "100w"}), json!({"end_date": "+10000-01-01 00:00"})]
    {
        let (st, e) = s.put(&format!("/v1/leases/{far}"), ALICE, body.clone()).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, &body.to_string());
    }
    let (st, e) = s.get(&format!("/v1/leases/{far}/extension?until=%2B262142-12-31%2000:00"), ALICE).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, "extension until");
    let (st, e) = s.get(&format!("/v1/leases/{far}/extension"), ALICE).await;
    assert_eq!(st, StatusCode::OK, "the default horizon stops at 9999: {e}");
    // Usage over a window before year 1.
    for q in ["start=-5000-01-01%2000:00", "end=%2B262142-12-31%2000:00", "start=0000-01-01%2000:00"] {
        let (st, e) = s.get(&format!("/v1/quotas/projects/p1/usage?{q}"), ALICE).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{q}: {e}");
        assert_eq!(e["code"], CODE, "{q}: {e}");
    }

    assert_eq!(log_length(&s).await, before, "a refused request wrote to the log");
    s.replay_verify();
    s.assert_no_panic();
}
