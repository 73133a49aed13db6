//! The log read while the manager is busy: a paging reader, a live tail and
//! a resumed tail each see every entry once.

use super::*;

/// Pages through `/v1/log` seven entries at a time, following along until
/// `stop` once caught up; every entry seen.
async fn page_through_log(url: String, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<Value> {
    let http = reqwest::Client::new();
    let mut after = String::new();
    let mut seen: Vec<Value> = Vec::new();
    loop {
        let body: Value = http
            .get(format!("{url}/v1/log?after={after}&limit=7"))
            .header("x-auth-token", ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let entries = body["entries"].as_array().unwrap().clone();
        after = body["next"].as_str().unwrap().to_string();
        let caught_up = entries.is_empty();
        seen.extend(entries);
        if caught_up {
            if *stop.borrow() {
                return seen;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(30)) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

/// The busy run: hosts, leases created from several clients at once, and
/// the manager firing their events meanwhile.
async fn busy_run(s: &Server) {
    for h in ["h1", "h2", "h3", "h4"] {
        enrol(s, h).await;
    }
    futures::future::join_all((0..6).map(|k| async move {
        for i in 0..8 {
            let r = if i % 2 == 0 {
                json!({"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 64})
            } else {
                json!({"resource_type": "virtual:thing", "n": i})
            };
            create(
                s,
                ALICE,
                json!({"name": format!("busy-{k}-{i}"), "start_date": "now", "end_date": in_secs(2),
                       "reservations": [r]}),
            )
            .await;
        }
    }))
    .await;
}

/// Waits (up to 30 s) until there are `count` lease events, all DONE.
async fn until_every_lease_event_is_done(store: &berth_store::Store, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = store.lease_events(&Default::default()).await.unwrap();
        if rows.len() == count && rows.iter().all(|e| e.status == "DONE") {
            return;
        }
        assert!(Instant::now() < deadline, "events did not all finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The reader's view of the whole log: the positions of its entries. A read
/// returns only what no running transaction can still commit below, so a
/// transaction open at that moment (a lane deciding a claim, the manager
/// recording) holds it back for as long as it runs: read (up to 10 s) until
/// the reader has caught up with the `seen` entries a tail saw.
async fn read_log_positions(store: &berth_store::Store, seen: usize) -> Vec<i64> {
    let mut log = Vec::new();
    let mut cursor = berth_store::Cursor::START;
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.len() < seen && Instant::now() < deadline {
        let page = store.read_log(cursor, 1000).await.unwrap();
        match page.last() {
            Some(last) => cursor = last.cursor(),
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        log.extend(page.iter().map(|e| e.position));
    }
    log
}

#[tokio::test]
async fn a_log_reader_and_a_live_tail_see_every_entry_of_a_busy_run_once() {
    let (_rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stream_url = format!("{}/v1/log/stream", s.url);
    // One live tail from the start; another that stops after 40 entries and
    // resumes with Last-Event-ID.
    let whole = tokio::spawn(sse_collect(stream_url.clone(), None, stop_rx.clone(), usize::MAX));
    let first_part = tokio::spawn(sse_collect(stream_url.clone(), None, stop_rx.clone(), 40));
    // A paging reader following along.
    let pager = tokio::spawn(page_through_log(s.url.clone(), stop_rx.clone()));
    busy_run(&s).await;
    // Quiet: every event finished, then the tails catch up.
    let store = s.db.store(2);
    until_every_lease_event_is_done(&store, 144).await;
    let first = first_part.await.unwrap();
    assert_eq!(first.len(), 40);
    let resumed =
        tokio::spawn(sse_collect(stream_url, Some(first.last().unwrap().0.clone()), stop_rx.clone(), usize::MAX));
    // A write shows on the live tails within a second (and the pager's next look).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_tx.send(true).unwrap();
    let whole = whole.await.unwrap();
    let resumed = resumed.await.unwrap();
    let paged = pager.await.unwrap();
    let log = read_log_positions(&store, whole.len()).await;
    let positions = |v: &[(String, Value)]| v.iter().map(|(_, d)| d["position"].as_i64().unwrap()).collect::<Vec<_>>();
    assert_eq!(positions(&whole), log, "the live tail saw every entry once, in the reader's order");
    let mut joined = positions(&first);
    joined.extend(positions(&resumed));
    assert_eq!(joined, log, "a resumed tail continues exactly where it left off");
    let paged: Vec<i64> = paged.iter().map(|e| e["position"].as_i64().unwrap()).collect();
    assert_eq!(paged, log, "the paging reader saw every entry once");
    assert!(log.len() > 400, "a busy run: {} entries", log.len());
    // Filters: one lease's stream only.
    let (_, ls) = s.get("/v1/leases", ADMIN).await;
    let id = ls["leases"][0]["id"].as_str().unwrap().to_string();
    let (tx2, rx2) = tokio::sync::watch::channel(false);
    let only = tokio::spawn(sse_collect(format!("{}/v1/log/stream?lease={id}", s.url), None, rx2, usize::MAX));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    tx2.send(true).unwrap();
    let only = only.await.unwrap();
    assert!(!only.is_empty() && only.iter().all(|(_, d)| d["stream"] == format!("lease:{id}")), "{only:?}");
    // The log is for admins; bad cursors are 400.
    let (st, _) = s.get("/v1/log", ALICE).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, body) = s.get("/v1/log?after=yesterday", ADMIN).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    s.replay_verify();
}

/// A lease event stream that starts behind changes already made (a long
/// transaction anywhere on the server holds the horizon back; here, a
/// cursor from the log's start) shows each change as it left the event:
/// the creation's UNDONE, then each claim and retry, the outcome last. As
/// they stood, the creation read late showed the outcome first, before the
/// claims, which a CLI tail once printed under load.
#[tokio::test]
async fn an_event_stream_that_starts_behind_shows_each_change_as_it_left_the_event() {
    let (_rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", "fail=until_fixed"));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let lease = create(
        &s,
        ALICE,
        json!({"name": "late", "start_date": "now", "end_date": in_secs(3600),
               "reservations": [{"resource_type": "virtual:thing"}]}),
    )
    .await;
    let id = lease["id"].as_str().unwrap();
    let failed = wait_event(&s, id, "start_lease", "ERROR", 20).await;
    assert_eq!(failed["attempts"], 3, "{failed}");
    // The start message, the creation, three claims, two retries, the outcome.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let url = format!("{}/v1/events/stream?after=0-0&lease_id={id}&event_type=start_lease", s.url);
    let seen = tokio::spawn(sse_collect(url, None, stop_rx, 8));
    let guard = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(20)).await;
        let _ = stop_tx.send(true);
    });
    let seen = seen.await.unwrap();
    guard.abort();
    let statuses: Vec<&str> = seen.iter().skip(1).map(|(_, e)| e["status"].as_str().unwrap()).collect();
    assert_eq!(
        statuses,
        ["UNDONE", "IN_PROGRESS", "UNDONE", "IN_PROGRESS", "UNDONE", "IN_PROGRESS", "ERROR"],
        "{seen:?}"
    );
    let attempts: Vec<i64> = seen.iter().skip(1).map(|(_, e)| e["attempts"].as_i64().unwrap()).collect();
    assert_eq!(attempts, [0, 1, 1, 2, 2, 3, 3], "{seen:?}");
}
