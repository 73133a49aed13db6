//! Several daemons on one database, daemons killed mid-hook, hooks that
//! fail: every due event runs once, with one idempotency key.

use super::*;

#[tokio::test]
async fn two_daemons_on_one_database_run_a_thousand_due_events_once_each() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_ttl(&dir, &webhook_plugins(&base, "", "", ""), 10_000);
    let db = TestDatabase::new().await;
    let db2 = TestDatabase { url: db.url.clone(), name: db.name.clone() };
    let a = Server::launch(db, &[], Some(&cfg)).await;
    let b = Server::launch(db2, &[], Some(&cfg)).await;
    // 334 leases of three events each, all due within the same second.
    // Wide enough that creating them on a loaded machine still ends before they are due.
    let due = Utc::now() + chrono::Duration::seconds(30);
    let bodies: Vec<Value> = (0..334)
        .map(|i| {
            json!({"name": format!("l{i}"), "start_date": rfc(due), "end_date": rfc(due + chrono::Duration::milliseconds(500)),
                   "reservations": [{"resource_type": "virtual:thing", "n": i}]})
        })
        .collect();
    let servers = [&a, &b];
    let created: Vec<Value> = futures::future::join_all(bodies.chunks(42).enumerate().map(|(k, chunk)| {
        let s = servers[k % 2];
        async move {
            let mut out = Vec::new();
            for body in chunk {
                out.push(create(s, ALICE, body.clone()).await);
            }
            out
        }
    }))
    .await
    .into_iter()
    .flatten()
    .collect();
    println!("created in {:?} before they are due", due - Utc::now());
    assert!(Utc::now() < due, "creating the leases took too long for the test to mean anything");
    let expected: HashSet<String> = created
        .iter()
        .flat_map(|l| l["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(expected.len(), 1002);
    let store = a.db.store(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let rows = store
            .lease_events(&berth_store::queries::lease_events::LeaseEventFilter {
                limit: Some(5000),
                ..Default::default()
            })
            .await
            .unwrap();
        if rows.iter().all(|e| e.status == "DONE") {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "not all events done: {:?}",
            rows.iter().filter(|e| e.status != "DONE").take(3).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(rows.len(), 1002);
    println!("all done {:?} after they were due", Utc::now() - due);
    let claimers: HashSet<_> = rows.iter().map(|e| e.claimed_by.clone().unwrap()).collect();
    println!(
        "events per manager: {:?}",
        claimers
            .iter()
            .map(|c| (c, rows.iter().filter(|e| e.claimed_by.as_ref() == Some(c)).count()))
            .collect::<Vec<_>>()
    );
    assert_eq!(claimers.len(), 2, "both managers took part");
    // At the receiver: each event's effect applied once, keyed by the event; none lost.
    let applied = rx.applied();
    assert_eq!(applied.len(), 1002, "one effect per lease event");
    let keyed: HashSet<String> = applied.keys().map(|k| k.split(':').next().unwrap().to_string()).collect();
    assert_eq!(keyed, expected);
    let calls = rx.calls();
    let hooks: Vec<_> = calls.iter().filter(|c| c.action != "validate").collect();
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for c in &hooks {
        *per_key.entry(c.key.as_str()).or_default() += 1;
    }
    println!("hook calls: {} for {} keys", hooks.len(), per_key.len());
    // A claim may expire on a loaded machine and be taken back (a second
    // attempt, same key): still one effect per event, as checked above.
    println!("events attempted more than once: {}", rows.iter().filter(|e| e.attempts > 1).count());
    a.replay_verify();
}

#[tokio::test]
async fn a_daemon_killed_mid_hook_is_finished_by_another_with_the_same_key() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The receiver holds the first call of each key: the hook is running
    // when its berthd dies.
    let cfg = config(&dir, &webhook_plugins(&base, "", "", "hold=1"));
    let db = TestDatabase::new().await;
    let db2 = TestDatabase { url: db.url.clone(), name: db.name.clone() };
    let mut a = Server::launch(db, &[], Some(&cfg)).await;
    let l = create(
        &a,
        ALICE,
        json!({"name": "k", "start_date": "now", "end_date": in_secs(3600),
               "reservations": [{"resource_type": "virtual:thing", "n": 1}]}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    rx.wait_for(10, "the first hook call", |c| c.iter().any(|c| c.action == "on_start")).await;
    let first = lease_events(&a, &id, ADMIN).await.into_iter().find(|e| e["event_type"] == "start_lease").unwrap();
    assert_eq!(first["status"], "IN_PROGRESS");
    let killed = first["claimed_by"].as_str().unwrap().to_string();
    a.kill();
    let b = Server::launch(db2, &[], Some(&cfg)).await;
    let done = wait_event(&b, &id, "start_lease", "DONE", 20).await;
    assert_eq!(done["attempts"], 2);
    assert_ne!(done["claimed_by"], json!(killed), "another berthd finished it");
    let calls = rx.calls_of("on_start");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].key, calls[1].key, "the same idempotency key on both attempts");
    assert_eq!(calls[1].payload["attempt"], 2);
    assert_eq!(rx.applied().len(), 1);
    rx.release();
    let metrics = b.metrics().await;
    assert!(metrics.contains("berth_manager_claim_rescues_total 1"), "{metrics}");
    assert_eq!(lease_status(&b, &id).await, "ACTIVE");
    b.replay_verify();
}

#[tokio::test]
async fn failing_hooks_retry_then_show_their_error_in_events() {
    let (_rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "fail=always", "fail=2", ""));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    enrol(&s, "h1").await;
    enrol(&s, "h2").await;
    let flaky = create(
        &s,
        ALICE,
        json!({"name": "flaky", "start_date": "now", "end_date": in_secs(3600),
               "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}),
    )
    .await;
    let broken = create(
        &s,
        ALICE,
        json!({"name": "broken", "start_date": "now", "end_date": in_secs(3600),
               "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 1}]}),
    )
    .await;
    let flaky = flaky["id"].as_str().unwrap();
    let broken = broken["id"].as_str().unwrap();
    let e = wait_event(&s, flaky, "start_lease", "DONE", 20).await;
    assert_eq!(e["attempts"], 3);
    assert_eq!(lease_status(&s, flaky).await, "ACTIVE");
    wait_event(&s, broken, "start_lease", "ERROR", 20).await;
    assert_eq!(lease_status(&s, broken).await, "ERROR");
    // Visible to the lease's project in /v1/events, with the far side's words.
    let (st, body) = s.get("/v1/events?status=ERROR", ALICE).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let errors = body["events"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["lease_id"], json!(broken));
    assert_eq!(errors[0]["attempts"], 3);
    assert!(errors[0]["last_error"].as_str().unwrap().contains("compute is down"), "{}", errors[0]);
    // Another project sees none of it; filters and pages work; bad filters are 400.
    let (_, other) = s.get("/v1/events", BOB).await;
    assert!(other["events"].as_array().unwrap().is_empty());
    let (_, page) = s.get(&format!("/v1/events?lease_id={flaky}&limit=2"), ALICE).await;
    let page = page["events"].as_array().unwrap();
    assert_eq!(page.len(), 2);
    let marker = page[1]["id"].as_str().unwrap();
    let (_, rest) = s.get(&format!("/v1/events?lease_id={flaky}&marker={marker}"), ALICE).await;
    assert_eq!(rest["events"].as_array().unwrap().len(), 1);
    let (_, starts) = s.get("/v1/events?event_type=start_lease", ADMIN).await;
    assert_eq!(starts["events"].as_array().unwrap().len(), 2);
    for bad in ["status=SOMETIMES", "event_type=x", "limit=0", "lease_id=nope", "colour=red"] {
        let (st, body) = s.get(&format!("/v1/events?{bad}"), ALICE).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body["code"].is_string());
    }
    s.replay_verify();
}
