//! Recurrences at local wall-clock times in an IANA zone, zoned dates, and
//! Berth's own objects refusing keys they do not know.

use super::*;

fn weekly_in_paris(extra: Value) -> Value {
    let mut rec =
        json!({"cron": "0 9 * * 1", "duration": "1h", "until": "2031-04-08 00:00", "time_zone": "Europe/Paris"});
    for (k, v) in extra.as_object().unwrap() {
        rec[k] = v.clone();
    }
    json!({"name": "class", "start_date": "2031-03-17 00:00", "recurrence": rec,
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]})
}

#[tokio::test]
async fn a_recurrence_fires_at_local_time_across_daylight_saving_and_shows_its_zone() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    // Paris moves to summer time on Sunday 2031-03-30: Mondays at 09:00
    // are 08:00Z before and 07:00Z after.
    let want = ["2031-03-17T08:00:00.000000", "2031-03-24T08:00:00.000000", "2031-03-31T07:00:00.000000"];
    let want = [&want[..], &["2031-04-07T07:00:00.000000"]].concat();
    let mut dry = weekly_in_paris(json!({}));
    dry["dry_run"] = json!(true);
    let (st, out) = s.post("/v1/leases", ALICE, dry).await;
    assert_eq!(st, StatusCode::OK, "{out}");
    let starts: Vec<&str> =
        out["occurrences"].as_array().unwrap().iter().map(|o| o["start_date"].as_str().unwrap()).collect();
    assert_eq!(starts, want);
    let (st, l) = s.post("/v1/leases", ALICE, weekly_in_paris(json!({}))).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    let ids = l["lease"]["recurrence"]["leases"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 4, "{l}");
    for (id, start) in ids.iter().zip(&want) {
        let (st, got) = s.get(&format!("/v1/leases/{}", id.as_str().unwrap()), ALICE).await;
        assert_eq!(st, StatusCode::OK, "{got}");
        assert_eq!(got["lease"]["start_date"], *start, "{got}");
        assert_eq!(got["lease"]["time_zone"], "Europe/Paris", "{got}");
    }
    // A lease that does not recur has no zone; a recurrence naming none is UTC.
    let one = json!({"name": "one", "start_date": "2031-03-03 09:00[Europe/Paris]", "end_date": "2031-03-03 10:00[Europe/Paris]",
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, one) = s.post("/v1/leases", ALICE, one).await;
    assert_eq!(st, StatusCode::CREATED, "{one}");
    assert_eq!(
        (&one["lease"]["start_date"], &one["lease"]["time_zone"]),
        (&json!("2031-03-03T08:00:00.000000"), &Value::Null)
    );
    let mut utc = weekly_in_paris(json!({"until": "2031-03-18 00:00"}));
    utc["recurrence"].as_object_mut().unwrap().remove("time_zone");
    utc["name"] = json!("utc");
    utc["start_date"] = json!("2031-03-10 00:00");
    let (st, utc) = s.post("/v1/leases", ALICE, utc).await;
    assert_eq!(st, StatusCode::CREATED, "{utc}");
    assert_eq!(
        (&utc["lease"]["start_date"], &utc["lease"]["time_zone"]),
        (&json!("2031-03-10T09:00:00.000000"), &json!("UTC"))
    );
    s.assert_no_panic();
}

#[tokio::test]
async fn unknown_keys_and_zones_are_refused_writing_nothing() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let before = log_length(&s).await;
    let (st, e) = s.post("/v1/leases", ALICE, weekly_in_paris(json!({"timezone": "Europe/Paris"}))).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.unknown_key", "recurrence.timezone");
    let m = e["error_message"].as_str().unwrap();
    assert!(m.contains(r#"recurrence: unknown key "timezone"; known: cron, duration, until, time_zone"#), "{e}");
    let ask = json!({"availability": {"reservations": [], "duration": "1h", "form": at(1)}});
    let (st, e) = s.post("/v1/availability", ALICE, ask).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.unknown_key", "availability.form");
    assert!(e["error_message"].as_str().unwrap().contains(r#"availability: unknown key "form""#), "{e}");
    let (st, e) = s.post("/v1/leases", ALICE, weekly_in_paris(json!({"time_zone": "Europe/Pariss"}))).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.unknown_time_zone", "Europe/Pariss");
    assert!(e["error_message"].as_str().unwrap().contains("\"Europe/Pariss\""), "{e}");
    let disagreeing = weekly_in_paris(json!({"until": "2031-07-01T00:00:00+01:00[Europe/Paris]"}));
    let (st, e) = s.post("/v1/leases", ALICE, disagreeing).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.invalid_date", "disagreeing offset");
    assert!(e["error_message"].as_str().unwrap().contains("+01:00 disagrees with Europe/Paris"), "{e}");
    assert_eq!(log_length(&s).await, before, "a refused request wrote to the log");
    // Blazar's own objects keep Blazar's leniency: its clients send `events`.
    let blazar = json!({"name": "b", "start_date": at(1), "end_date": at(2), "events": [],
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", ALICE, blazar).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    s.assert_no_panic();
}
