//! Operators' controls, black box: pause and resume across two replicas,
//! retry of an event that failed against a real receiver, cancel, fire,
//! end now and recover; each recorded in the log with who did it.

use super::*;

/// The log's entries of `ty`, as an admin reads them.
async fn entries_of(s: &Server, ty: &str) -> Vec<Value> {
    s.log_entries().await.into_iter().filter(|e| e["type"] == ty).collect()
}

async fn event_of(s: &Server, lease: &str, kind: &str) -> Value {
    lease_events(s, lease, ADMIN).await.into_iter().find(|e| e["event_type"] == kind).unwrap()
}

/// POSTs a control; answers its status and body.
async fn control(s: &Server, path: &str, token: &str) -> (StatusCode, Value) {
    s.post(path, token, json!({})).await
}

fn thing(name: &str, start: &str, end: &str) -> Value {
    json!({"name": name, "start_date": start, "end_date": end, "reservations": [{"resource_type": "virtual:thing"}]})
}

/// Whether `s` exports `berth_manager_paused` as `want` within 5 s: the
/// manager refreshes it as it sweeps, every poll interval (250 ms here).
async fn paused_gauge_becomes(s: &Server, want: f64) -> bool {
    for _ in 0..20 {
        let text = s.metrics().await;
        let now = text.lines().find_map(|l| l.strip_prefix("berth_manager_paused ")?.trim().parse::<f64>().ok());
        if now == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

#[tokio::test]
async fn a_pause_holds_every_replica_and_a_resume_fires_what_waited() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    let db = TestDatabase::new().await;
    let db2 = TestDatabase { url: db.url.clone(), name: db.name.clone() };
    let a = Server::launch(db, &[], Some(&cfg)).await;
    let b = Server::launch(db2, &[], Some(&cfg)).await;
    // Members may neither see nor change it.
    assert_eq!(s_status(a.get("/v1/manager", ALICE).await), StatusCode::FORBIDDEN);
    assert_eq!(s_status(a.put("/v1/manager", ALICE, json!({"paused": true})).await), StatusCode::FORBIDDEN);
    let (st, m) = a.put("/v1/manager", ADMIN, json!({"paused": true})).await;
    assert_eq!(st, StatusCode::OK, "{m}");
    assert_eq!(m["manager"]["paused"], true);
    assert_eq!(m["manager"]["changed_by"], json!({"user_id": "admin", "project_id": "admin"}));
    let paused_at = Instant::now();
    // Twenty leases starting now, made through both replicas: all due at once.
    let mut ids = Vec::new();
    for i in 0..20 {
        let s = if i % 2 == 0 { &a } else { &b };
        ids.push(
            create(s, ALICE, thing(&format!("p{i}"), "now", &in_secs(7200))).await["id"].as_str().unwrap().to_string(),
        );
    }
    // Several poll intervals of both managers: nothing fires.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(rx.calls_of("on_start").is_empty(), "fired while paused: {:?}", rx.calls_of("on_start"));
    let (_, m) = b.get("/v1/manager", ADMIN).await;
    assert_eq!(m["manager"]["paused"], true, "{m}");
    assert_eq!(m["manager"]["counts"]["due"], 20, "{m}");
    assert_eq!(m["manager"]["counts"]["in_progress"], 0, "{m}");
    for id in &ids {
        assert_eq!(event_of(&a, id, "start_lease").await["status"], "UNDONE");
    }
    println!("paused for {:?} with 20 events due", paused_at.elapsed());
    // Each replica says so in its metrics.
    for s in [&a, &b] {
        assert!(paused_gauge_becomes(s, 1.0).await, "{}", s.metrics().await);
    }
    // Resumed through the other replica: every start fires, across both.
    let (st, m) = b.put("/v1/manager", ADMIN, json!({"manager": {"paused": false}})).await;
    assert_eq!(st, StatusCode::OK, "{m}");
    assert_eq!(m["manager"]["paused"], false);
    let resumed = Instant::now();
    for id in &ids {
        wait_event(&a, id, "start_lease", "DONE", 20).await;
    }
    println!("all 20 started {:?} after the resume", resumed.elapsed());
    assert_eq!(rx.calls_of("on_start").len(), 20);
    for s in [&a, &b] {
        assert!(paused_gauge_becomes(s, 0.0).await, "{}", s.metrics().await);
    }
    let (_, m) = a.get("/v1/manager", ADMIN).await;
    let replicas = m["manager"]["replicas"].as_array().unwrap();
    assert!(!replicas.is_empty() && replicas.len() <= 2, "{m}");
    // Each change is in the log with who made it; a repeat records nothing.
    b.put("/v1/manager", ADMIN, json!({"paused": false})).await;
    for ty in ["ManagerPaused", "ManagerResumed"] {
        let e = entries_of(&a, ty).await;
        assert_eq!(e.len(), 1, "{ty}: {e:?}");
        assert_eq!(e[0]["meta"]["actor"], "admin");
        assert_eq!(e[0]["meta"]["causation"], "berth:manager:update");
        assert_eq!(e[0]["data"]["user_id"], "admin");
    }
    for bad in [json!({"paused": "yes"}), json!({}), json!({"paused": true, "colour": 1}), json!([true])] {
        let (st, body) = a.put("/v1/manager", ADMIN, bad.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["code"], "berth.invalid");
    }
    a.replay_verify();
}

#[tokio::test]
async fn busy_replicas_stop_claiming_within_a_second_of_a_pause() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    let db = TestDatabase::new().await;
    let db2 = TestDatabase { url: db.url.clone(), name: db.name.clone() };
    let a = Server::launch(db, &[], Some(&cfg)).await;
    let b = Server::launch(db2, &[], Some(&cfg)).await;
    // Thirty starts falling due one every 200 ms, made through both replicas.
    let first = Utc::now() + chrono::Duration::seconds(6);
    let mut ids = Vec::new();
    for i in 0..30 {
        let s = if i % 2 == 0 { &a } else { &b };
        let start = rfc(first + chrono::Duration::milliseconds(200 * i));
        let l = create(s, ALICE, thing(&format!("b{i}"), &start, &in_secs(7200))).await;
        ids.push(l["id"].as_str().unwrap().to_string());
    }
    assert!(Utc::now() < first, "creating the leases took too long for the test to mean anything");
    // Mid-way, paused through one replica.
    tokio::time::sleep((first - Utc::now() + chrono::Duration::seconds(2)).to_std().unwrap()).await;
    let (st, _) = a.put("/v1/manager", ADMIN, json!({"paused": true})).await;
    assert_eq!(st, StatusCode::OK);
    let paused_at = Utc::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let calls = rx.calls_of("on_start");
    let late: Vec<_> = calls.iter().filter(|c| c.received > paused_at + chrono::Duration::seconds(1)).collect();
    assert!(late.is_empty(), "hooks called over a second after the pause: {late:?}");
    assert!(!calls.is_empty() && calls.len() < 30, "{} of 30 started before the pause", calls.len());
    println!("{} of 30 started before the pause; none after", calls.len());
    b.put("/v1/manager", ADMIN, json!({"paused": false})).await;
    for id in &ids {
        wait_event(&b, id, "start_lease", "DONE", 20).await;
    }
    assert_eq!(rx.applied().len(), 30, "each start once");
    a.replay_verify();
}

#[tokio::test]
async fn a_resume_wakes_managers_that_would_sleep_a_minute() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    // Polling once a minute: only the resume's notification can wake them in time.
    let text = std::fs::read_to_string(&cfg).unwrap().replace("poll_interval_ms = 250", "poll_interval_ms = 60000");
    std::fs::write(&cfg, text).unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    s.put("/v1/manager", ADMIN, json!({"paused": true})).await;
    let id = create(&s, ALICE, thing("woken", "now", &in_secs(7200))).await["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.calls_of("on_start").is_empty());
    let resumed = Instant::now();
    s.put("/v1/manager", ADMIN, json!({"paused": false})).await;
    wait_event(&s, &id, "start_lease", "DONE", 5).await;
    println!("started {:?} after the resume", resumed.elapsed());
    assert!(resumed.elapsed() < Duration::from_secs(3), "{:?}", resumed.elapsed());
}

fn s_status((st, _): (StatusCode, Value)) -> StatusCode {
    st
}

#[tokio::test]
async fn an_event_that_failed_against_the_receiver_is_retried_and_done() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", "fail=until_fixed"));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let id = create(&s, ALICE, thing("broken", "now", &in_secs(7200))).await["id"].as_str().unwrap().to_string();
    let failed = wait_event(&s, &id, "start_lease", "ERROR", 20).await;
    assert_eq!(failed["attempts"], 3);
    assert!(failed["last_error"].as_str().unwrap().contains("compute is broken"), "{failed}");
    assert_eq!(lease_status(&s, &id).await, "ERROR");
    let event = failed["id"].as_str().unwrap();
    // Only admins; only an event in ERROR; only events that exist.
    assert_eq!(control(&s, &format!("/v1/events/{event}/retry"), ALICE).await.0, StatusCode::FORBIDDEN);
    assert_eq!(control(&s, &format!("/v1/events/{event}/retry"), BOB).await.0, StatusCode::NOT_FOUND);
    let end = event_of(&s, &id, "end_lease").await;
    let (st, body) = control(&s, &format!("/v1/events/{}/retry", end["id"].as_str().unwrap()), ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease_event.not_in_error")));
    for missing in [uuid::Uuid::new_v4().to_string(), "nope".to_string()] {
        let (st, body) = control(&s, &format!("/v1/events/{missing}/retry"), ADMIN).await;
        assert_eq!((st, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("berth.lease_event.not_found")));
    }
    // The far side is fixed; the retry runs it again from its first attempt.
    rx.fix();
    let (st, body) = control(&s, &format!("/v1/events/{event}/retry"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["event"]["id"], event);
    assert!(["UNDONE", "IN_PROGRESS", "DONE"].contains(&body["event"]["status"].as_str().unwrap()), "{body}");
    let done = wait_event(&s, &id, "start_lease", "DONE", 20).await;
    assert_eq!(done["attempts"], 1, "attempts start again: {done}");
    assert_eq!(lease_status(&s, &id).await, "ACTIVE");
    assert_eq!(rx.applied().len(), 1, "the effect applied once");
    let retried = entries_of(&s, "LeaseEventRetried").await;
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0]["data"]["event"], event);
    assert_eq!(
        (retried[0]["meta"]["actor"].as_str(), retried[0]["meta"]["project"].as_str()),
        (Some("admin"), Some("admin"))
    );
    s.replay_verify();
}

#[tokio::test]
async fn cancel_fire_end_and_recover_do_what_they_say_and_refuse_wrong_states() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "fail=permanent", "", ""));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let later =
        create(&s, ALICE, thing("later", &in_secs(3600), &in_secs(7200))).await["id"].as_str().unwrap().to_string();
    // A lease that has not started cannot be ended.
    let (st, body) = control(&s, &format!("/v1/leases/{later}/end"), ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease.not_started")), "{body}");
    // Fire its start now; cancel its before-end.
    let start = event_of(&s, &later, "start_lease").await;
    let before_end = event_of(&s, &later, "before_end_lease").await;
    let (st, body) = control(&s, &format!("/v1/events/{}/cancel", before_end["id"].as_str().unwrap()), ADMIN).await;
    assert_eq!((st, body["event"]["status"].as_str()), (StatusCode::OK, Some("CANCELLED")), "{body}");
    let (st, body) = control(&s, &format!("/v1/events/{}/cancel", before_end["id"].as_str().unwrap()), ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease_event.not_pending")));
    assert_eq!(
        control(&s, &format!("/v1/events/{}/fire", start["id"].as_str().unwrap()), ALICE).await.0,
        StatusCode::FORBIDDEN
    );
    let (st, body) = control(&s, &format!("/v1/events/{}/fire", start["id"].as_str().unwrap()), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    wait_event(&s, &later, "start_lease", "DONE", 20).await;
    assert_eq!(lease_status(&s, &later).await, "ACTIVE");
    let (st, body) = control(&s, &format!("/v1/events/{}/fire", start["id"].as_str().unwrap()), ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease_event.not_pending")));
    // End it now: its end runs through the plugin; the cancelled before-end never does.
    assert_eq!(control(&s, &format!("/v1/leases/{later}/end"), ALICE).await.0, StatusCode::FORBIDDEN);
    let (st, body) = control(&s, &format!("/v1/leases/{later}/end"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["lease"]["id"], later.as_str());
    wait_event(&s, &later, "end_lease", "DONE", 20).await;
    assert_eq!(lease_status(&s, &later).await, "TERMINATED");
    assert_eq!(rx.calls_of("on_end").len(), 1);
    assert!(rx.calls_of("before_end").is_empty());
    assert_eq!(event_of(&s, &later, "before_end_lease").await["status"], "CANCELLED");
    let (_, cancelled) = s.get("/v1/events?status=cancelled", ADMIN).await;
    assert_eq!(cancelled["events"].as_array().unwrap().len(), 1, "{cancelled}");
    let (st, body) = control(&s, &format!("/v1/leases/{later}/end"), ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease.ended")), "{body}");
    recover_a_broken_lease(&s).await;
    for ty in ["LeaseEventCancelled", "LeaseEventFired", "LeaseRecovered"] {
        let e = entries_of(&s, ty).await;
        assert_eq!(e.len(), 1, "{ty}");
        assert_eq!(e[0]["meta"]["actor"], "admin", "{ty}");
    }
    assert_eq!(entries_of(&s, "LeaseUpdated").await.last().unwrap()["meta"]["causation"], "berth:leases:end");
    s.replay_verify();
}

/// A lease whose start failed for good (the instance plugin's far side
/// says no) goes to ERROR; once the world is fixed it is recovered: ACTIVE.
async fn recover_a_broken_lease(s: &Server) {
    enrol(s, "h1").await;
    let broken = create(
        s,
        ALICE,
        json!({"name": "broken", "start_date": "now", "end_date": in_secs(7200),
               "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 1}]}),
    )
    .await;
    let broken = broken["id"].as_str().unwrap();
    wait_event(s, broken, "start_lease", "ERROR", 20).await;
    assert_eq!(lease_status(s, broken).await, "ERROR");
    assert_eq!(control(s, &format!("/v1/leases/{broken}/recover"), ALICE).await.0, StatusCode::FORBIDDEN);
    let (st, body) = control(s, &format!("/v1/leases/{broken}/recover"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["lease"]["status"], "ACTIVE", "{body}");
    assert_eq!(body["lease"]["reservations"][0]["status"], "active", "{body}");
    let (st, body) = control(s, &format!("/v1/leases/{broken}/recover"), ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease.not_in_error")));
    let (st, body) = control(s, "/v1/leases/nope/recover", ADMIN).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("berth.lease.not_found")));
}
