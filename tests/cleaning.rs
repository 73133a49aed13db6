//! `cleaning_time` from the configuration, black box: a host is not
//! reservable for that long after a lease on it ends.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use berth_testkit::{Server, ADMIN, ALICE};
use chrono::{Duration, DurationRound, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// `h` hours after a future hour boundary, in Blazar's input format.
fn at(h: i64) -> String {
    let base = (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap();
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

fn host_lease(name: &str, start: i64, end: i64) -> Value {
    json!({
        "name": name, "start_date": at(start), "end_date": at(end),
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
                          "hypervisor_properties": "", "resource_properties": ""}],
        "events": []
    })
}

#[tokio::test]
async fn the_configured_cleaning_time_keeps_leases_on_a_host_apart() {
    let s = Server::start_with_config(Some("cleaning_time = 60\n")).await;
    let body = json!({"name": "only", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    let (st, a) = s.post("/v1/leases", ALICE, host_lease("a", 1, 3)).await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    let (st, refused) = s.post("/v1/leases", ALICE, host_lease("back-to-back", 3, 5)).await;
    assert_eq!(st, StatusCode::CONFLICT, "{refused}");
    let (st, b) = s.post("/v1/leases", ALICE, host_lease("after-the-gap", 4, 5)).await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    // Growing a into b's cleaning is refused too.
    let id = a["lease"]["id"].as_str().unwrap();
    let (st, grown) = s.put(&format!("/v1/leases/{id}"), ALICE, json!({"end_date": at(4)})).await;
    assert_eq!(st, StatusCode::CONFLICT, "{grown}");
    // A host saying it needs no cleaning takes back-to-back leases.
    let id = host["host"]["id"].as_str().unwrap();
    let (st, _) = s.put(&format!("/v1/os-hosts/{id}"), ADMIN, json!({"cleaning_time": "0"})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, c) = s.post("/v1/leases", ALICE, host_lease("no-cleaning", 5, 6)).await;
    assert_eq!(st, StatusCode::CREATED, "{c}");
    s.replay_verify();
}
