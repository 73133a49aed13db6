//! Reservation parameters declared and typed; recurrences read as crontab
//! and capped.

use super::*;

#[tokio::test]
async fn reservation_parameters_are_declared_and_typed() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let lease = |params: Value| {
        let mut r = json!({"resource_type": "physical:host"});
        for (k, v) in params.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({"name": "p", "start_date": at(1), "end_date": at(2), "reservations": [r]})
    };
    let before = log_length(&s).await;
    let (st, e) = s.post("/v1/leases", ALICE, lease(json!({"min": 1, "hypervisor_propertie": ""}))).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.unknown_parameter", "misspelt");
    assert!(e["error_message"].as_str().unwrap().contains("\"hypervisor_propertie\""), "{e}");
    for bad in [json!({"min": "one"}), json!({"min": 1.5}), json!({"max": [2]}), json!({"resource_properties": 7})] {
        let (st, e) = s.post("/v1/leases", ALICE, lease(bad.clone())).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.invalid_parameter", &bad.to_string());
    }
    let vm = json!({"name": "vm", "start_date": at(1), "end_date": at(2),
        "reservations": [{"resource_type": "virtual:instance", "amount": "1", "vcpus": 1, "memory_mb": 64, "colour": "red"}]});
    let (st, e) = s.post("/v1/leases", ALICE, vm).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.unknown_parameter", "colour");
    for prolong in [json!("1"), json!(0), json!("soon")] {
        let (st, e) = s.post("/v1/availability", ALICE, json!({"reservations": [], "duration": prolong})).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{prolong}: {e}");
    }
    assert_eq!(log_length(&s).await, before, "a refused lease wrote to the log");
    // Blazar's clients send numbers as strings: they are stored as numbers.
    let (st, l) = s.post("/v1/leases", ALICE, lease(json!({"min": "1", "max": "1"}))).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    assert_eq!((&l["lease"]["reservations"][0]["min"], &l["lease"]["reservations"][0]["max"]), (&json!(1), &json!(1)));
    let id = l["lease"]["id"].as_str().unwrap();
    let (st, e) = s.put(&format!("/v1/leases/{id}"), ALICE, json!({"prolong_for": "1"})).await;
    assert_eq!(
        (st, e["error_message"].as_str().unwrap_or("").contains("give a unit")),
        (StatusCode::BAD_REQUEST, true),
        "{e}"
    );
    s.assert_no_panic();
}

/// The weekdays (chrono's, Monday first) a recurring dry run books.
async fn booked_days(s: &Server, cron: &str) -> Vec<chrono::Weekday> {
    use chrono::Datelike;
    let body = json!({"name": "rec", "start_date": "2031-03-03 00:00", "dry_run": true,
        "recurrence": {"cron": cron, "duration": "1h", "until": "2031-03-17 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, out) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::OK, "{cron}: {out}");
    let occurrences = out["occurrences"].as_array().unwrap();
    assert_eq!(out["count"], occurrences.len());
    occurrences
        .iter()
        .map(|o| {
            assert_eq!(o["fits"], true, "{o}");
            let start = o["start_date"].as_str().unwrap();
            assert!(start.ends_with("T09:00:00.000000"), "{cron}: {start}");
            chrono::NaiveDateTime::parse_from_str(start, "%Y-%m-%dT%H:%M:%S%.f").unwrap().weekday()
        })
        .collect()
}

#[tokio::test]
async fn cron_reads_as_crontab_and_recurrences_are_capped() {
    use chrono::Weekday::*;
    let s = Server::start().await;
    enrol(&s, "h").await;
    let before = log_length(&s).await;
    // Two weeks from Monday 2031-03-03.
    assert_eq!(booked_days(&s, "0 9 * * 1").await, vec![Mon, Mon]);
    assert_eq!(booked_days(&s, "0 9 * * 0").await, vec![Sun, Sun]);
    assert_eq!(booked_days(&s, "0 9 * * 7").await, vec![Sun, Sun]);
    assert_eq!(booked_days(&s, "0 9 * * mon-fri").await, [[Mon, Tue, Wed, Thu, Fri]; 2].concat());
    assert_eq!(log_length(&s).await, before, "a dry run wrote to the log");
    // Errors quote what the user wrote.
    for cron in ["0 9 * * 8", "0 9 * *", "0 0 9 * * 1"] {
        let body = json!({"name": "rec", "start_date": "2031-03-03 00:00",
            "recurrence": {"cron": cron, "duration": "1h", "until": "2031-03-17 00:00"}});
        let (st, e) = s.post("/v1/leases", ALICE, body).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{cron}: {e}");
        assert!(e["error_message"].as_str().unwrap().contains(&format!("{cron:?}")), "{cron}: {e}");
    }
    // Daily for 200 days: over the cap of 100, refused with the count.
    let body = json!({"name": "daily", "start_date": "2031-03-03 00:00",
        "recurrence": {"cron": "0 9 * * *", "duration": "1h", "until": "2031-09-19 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, e) = s.post("/v1/leases", ALICE, body).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.too_many_occurrences", "200 days");
    assert!(e["error_message"].as_str().unwrap().contains("books 200 occurrences, more than the 100"), "{e}");
    assert_eq!(log_length(&s).await, before, "a refused recurrence wrote to the log");
    // A weekly one books for real, Mondays.
    let body = json!({"name": "weekly", "start_date": "2031-03-03 00:00",
        "recurrence": {"cron": "0 9 * * 1", "duration": "1h", "until": "2031-03-17 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    assert_eq!(l["lease"]["start_date"], "2031-03-03T09:00:00.000000");
    assert_eq!(l["lease"]["recurrence"]["leases"].as_array().unwrap().len(), 2);
    // Now the first Monday is taken: a dry run says so.
    let body = json!({"name": "again", "start_date": "2031-03-03 00:00", "dry_run": true,
        "recurrence": {"cron": "0 9 * * 1", "duration": "1h", "until": "2031-03-17 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (_, out) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(out["occurrences"][0]["fits"], false, "{out}");
    s.assert_no_panic();
}

#[tokio::test]
async fn the_recurrence_cap_comes_from_the_configuration() {
    let s = Server::start_with_config(Some("[api]\nmax_occurrences = 3\n")).await;
    enrol(&s, "h").await;
    let body = json!({"name": "daily", "start_date": "2031-03-03 00:00",
        "recurrence": {"cron": "0 9 * * *", "duration": "1h", "until": "2031-03-07 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, e) = s.post("/v1/leases", ALICE, body).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.too_many_occurrences", "4 days");
    assert!(e["error_message"].as_str().unwrap().contains("books 4 occurrences, more than the 3"), "{e}");
    s.assert_no_panic();
}
