//! The manager, black box: real berthd processes on a real database, with a
//! real HTTP receiver standing in for the compute service.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::receiver;
use berth_testkit::Server;
use chrono::{SecondsFormat, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ALICE: &str = "alice:p1";
const BOB: &str = "bob:p2";

/// A configuration file for berthd: short claims and polls so the tests are
/// quick; `plugins` is the `[plugins]` section.
fn config(dir: &tempfile::TempDir, plugins: &str) -> PathBuf {
    config_with_ttl(dir, plugins, 2000)
}

fn config_with_ttl(dir: &tempfile::TempDir, plugins: &str, claim_ttl_ms: u64) -> PathBuf {
    let path = dir.path().join("berth.toml");
    let text = format!(
        "[manager]\npoll_interval_ms = 250\nclaim_ttl_ms = {claim_ttl_ms}\nretry_min_ms = 50\nretry_max_ms = 200\n\
         max_attempts = 3\nshutdown_grace_ms = 1000\n\n{plugins}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `[plugins]` with the built-in types acting through webhooks on the
/// receiver (query strings `instance` and `host`) and `virtual:thing`, an
/// external type held entirely outside, served by the receiver too.
fn webhook_plugins(base: &str, instance: &str, host: &str, thing: &str) -> String {
    format!(
        r#"[plugins]
enabled = ["physical:host", "virtual:instance", "virtual:thing"]
[plugins.host]
recycle_grace_s = 2
[plugins.drivers."virtual:instance"]
driver = "webhook"
url = "{base}/hook?{instance}"
timeout_ms = 5000
[plugins.drivers."physical:host"]
driver = "webhook"
url = "{base}/hook?{host}"
timeout_ms = 5000
[plugins.external."virtual:thing"]
driver = "webhook"
url = "{base}/hook?validate=nothing&{thing}"
timeout_ms = 30000
"#
    )
}

fn rfc(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn in_secs(s: i64) -> String {
    rfc(Utc::now() + chrono::Duration::seconds(s))
}

async fn enrol(s: &Server, name: &str) -> String {
    let (st, host) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100})).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

async fn create(s: &Server, token: &str, body: Value) -> Value {
    let (st, l) = s.post("/v1/leases", token, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    l["lease"].clone()
}

async fn lease_events(s: &Server, id: &str, token: &str) -> Vec<Value> {
    let (st, body) = s.get(&format!("/v1/leases/{id}/events"), token).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["events"].as_array().unwrap().clone()
}

/// Waits for the lease's event of `kind` to reach `status`; returns it.
async fn wait_event(s: &Server, id: &str, kind: &str, status: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let events = lease_events(s, id, ADMIN).await;
        let e = events.iter().find(|e| e["event_type"] == kind).unwrap().clone();
        if e["status"] == status {
            return e;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {kind} {status}: {e}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn lease_status(s: &Server, id: &str) -> String {
    let (_, l) = s.get(&format!("/v1/leases/{id}"), ADMIN).await;
    l["lease"]["status"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_lease_starting_now_is_active_and_its_instance_woken() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let host = enrol(&s, "h1").await;
    // The instance is a Placement consumer of the lease's project, as the
    // compute service makes it; a member may name only its own.
    let instance = uuid::Uuid::new_v4().to_string();
    let placed = reqwest::Client::new()
        .put(format!("{}/placement/allocations/{instance}", s.url))
        .header("x-auth-token", ADMIN)
        .header("openstack-api-version", "placement 1.28")
        .json(&json!({"allocations": {&host: {"resources": {"VCPU": 1}}}, "project_id": "p1", "user_id": "alice",
                      "consumer_generation": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(placed.status(), StatusCode::NO_CONTENT);
    let created = Instant::now();
    let l = create(
        &s,
        ALICE,
        json!({"name": "now", "start_date": "now", "end_date": in_secs(4),
               "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 512,
                                 "instance_ids": [&instance]}]}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    rx.wait_for(10, "the instance woken", |c| c.iter().any(|c| c.action == "wake_up")).await;
    let woken = created.elapsed();
    let wake = rx.calls_of("wake_up").remove(0);
    assert_eq!(wake.payload["instance_id"], instance.as_str());
    assert_eq!(wake.payload["lease"]["id"], json!(id));
    let start = wait_event(&s, &id, "start_lease", "DONE", 10).await;
    let active_at = created.elapsed();
    assert_eq!(lease_status(&s, &id).await, "ACTIVE");
    assert_eq!(start["attempts"], 1);
    assert!(start["claimed_by"].is_string(), "{start}");
    assert!(wake.key.starts_with(start["id"].as_str().unwrap()), "the key names the lease event: {}", wake.key);
    // Measured, and reported: the issue asks for under a second; the bound
    // asserted is loose because test machines are shared.
    println!("instance woken {woken:?}, lease ACTIVE (as read back) {active_at:?} after creation");
    assert!(woken < Duration::from_secs(5), "woken only after {woken:?}");
    // The lease's own project sees its events; another project does not.
    assert_eq!(lease_events(&s, &id, ALICE).await.len(), 3);
    let (st, _) = s.get(&format!("/v1/leases/{id}/events"), BOB).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    wait_event(&s, &id, "end_lease", "DONE", 15).await;
    assert_eq!(lease_status(&s, &id).await, "TERMINATED");
    let deleted = rx.calls_of("delete");
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].payload["instance_id"], instance.as_str());
    // Metrics saw it.
    let metrics = s.metrics().await;
    for name in
        ["berth_manager_events_done_total", "berth_manager_events_claimed_total", "berth_manager_lag_seconds_bucket"]
    {
        assert!(metrics.contains(name), "{name} missing from /metrics:\n{metrics}");
    }
    s.replay_verify();
}

#[tokio::test]
async fn hosts_return_by_each_end_policy() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let store = s.db.store(2);
    let mut leases = Vec::new();
    for policy in ["release", "recycle", "shared"] {
        let host = enrol(&s, &format!("h-{policy}")).await;
        let l = create(
            &s,
            ALICE,
            json!({"name": policy, "start_date": "now", "end_date": in_secs(3),
                   "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "end_policy": policy,
                      "hypervisor_properties": format!("[\"=\", \"$hypervisor_hostname\", \"h-{policy}\"]")}]}),
        )
        .await;
        let id = l["id"].as_str().unwrap().to_string();
        let pool: uuid::Uuid = l["reservations"][0]["resource_id"].as_str().unwrap().parse().unwrap();
        wait_event(&s, &id, "start_lease", "DONE", 10).await;
        let host: uuid::Uuid = host.parse().unwrap();
        assert_eq!(store.host_pools(host).await.unwrap(), vec![pool], "{policy}: in the lease's pool");
        leases.push((policy, host, id, pool));
    }
    for (policy, host, id, pool) in &leases {
        wait_event(&s, id, "end_lease", "DONE", 15).await;
        assert_eq!(lease_status(&s, id).await, "TERMINATED");
        let pools = store.host_pools(*host).await.unwrap();
        assert!(!pools.contains(pool));
        let (_, h) = s.get(&format!("/v1/os-hosts/{host}"), ADMIN).await;
        let expected_action = match *policy {
            "release" => {
                assert_eq!(pools, vec![berth_core::lease::FREE_POOL]);
                assert_eq!(h["host"]["reservable"], true);
                "release"
            }
            "recycle" => {
                // Nothing else was on it: straight back to the free pool.
                assert_eq!(pools, vec![berth_core::lease::FREE_POOL]);
                "recycle"
            }
            _ => {
                assert_eq!(pools, vec![berth_core::lease_event::SHARED_POOL]);
                assert_eq!(h["host"]["reservable"], false);
                // Until an admin returns it.
                let (st, _) = s.put(&format!("/v1/os-hosts/{host}"), ADMIN, json!({"reservable": true})).await;
                assert_eq!(st, StatusCode::OK);
                assert_eq!(store.host_pools(*host).await.unwrap(), vec![berth_core::lease::FREE_POOL]);
                "share"
            }
        };
        let calls: Vec<_> =
            rx.calls_of(expected_action).into_iter().filter(|c| c.payload["lease"]["id"] == json!(id)).collect();
        assert_eq!(calls.len(), 1, "{policy}: one {expected_action} call");
    }
    s.replay_verify();
}

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

/// Reads a Server-Sent Events stream until `stop`, returning each event's
/// (id, data).
async fn sse_collect(
    url: String,
    last_event_id: Option<String>,
    stop: tokio::sync::watch::Receiver<bool>,
    max: usize,
) -> Vec<(String, Value)> {
    let mut req = reqwest::Client::new().get(url).header("x-auth-token", ADMIN);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let mut resp = req.send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut buf = String::new();
    let mut out = Vec::new();
    let mut stop = stop;
    loop {
        tokio::select! {
            chunk = resp.chunk() => match chunk.unwrap() {
                Some(bytes) => buf.push_str(&String::from_utf8_lossy(&bytes)),
                None => return out,
            },
            _ = stop.wait_for(|s| *s) => return out,
        }
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if let Some(id) = id {
                out.push((id, serde_json::from_str(&data).unwrap()));
                if out.len() >= max {
                    return out;
                }
            }
        }
    }
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
    let pager = {
        let url = s.url.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
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
        })
    };
    // The busy run: hosts, leases created from several clients at once, and
    // the manager firing their events meanwhile.
    for h in ["h1", "h2", "h3", "h4"] {
        enrol(&s, h).await;
    }
    futures::future::join_all((0..6).map(|k| {
        let s = &s;
        async move {
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
        }
    }))
    .await;
    // Quiet: every event finished, then the tails catch up.
    let store = s.db.store(2);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = store.lease_events(&Default::default()).await.unwrap();
        if rows.len() == 144 && rows.iter().all(|e| e.status == "DONE") {
            break;
        }
        assert!(Instant::now() < deadline, "events did not all finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    // The reader's view of the whole log. A read returns only what no running
    // transaction can still commit below, so a transaction open at that
    // moment (a lane deciding a claim, the manager recording) holds it back
    // for as long as it runs: read until the reader has caught up with what
    // the tail saw.
    let mut log = Vec::new();
    let mut cursor = berth_store::Cursor::START;
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.len() < whole.len() && Instant::now() < deadline {
        let page = store.read_log(cursor, 1000).await.unwrap();
        match page.last() {
            Some(last) => cursor = last.cursor(),
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        log.extend(page.iter().map(|e| e.position));
    }
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

#[tokio::test]
async fn the_example_external_plugin_goes_through_a_whole_lease() {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/plugins/floatingip/floatingip.py");
    let state = dir.path().join("fip.json");
    let plugins = format!(
        r#"[plugins]
enabled = ["physical:host", "virtual:instance", "virtual:floatingip"]
[plugins.external."virtual:floatingip"]
driver = "exec"
program = "{}"
env = {{ FLOATINGIP_STATE = "{}", FLOATINGIP_POOL = "198.51.100.1-198.51.100.3" }}
"#,
        script.display(),
        state.display()
    );
    let cfg = config(&dir, &plugins);
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let l = create(
        &s,
        ALICE,
        json!({"name": "fip", "start_date": "now", "end_date": in_secs(3), "before_end_date": in_secs(1),
               "reservations": [{"resource_type": "virtual:floatingip", "amount": 2}]}),
    )
    .await;
    let id = l["id"].as_str().unwrap().to_string();
    wait_event(&s, &id, "start_lease", "DONE", 15).await;
    assert_eq!(lease_status(&s, &id).await, "ACTIVE");
    let held: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let rid = l["reservations"][0]["id"].as_str().unwrap();
    assert_eq!(held["allocations"][rid].as_array().unwrap().len(), 2, "{held}");
    wait_event(&s, &id, "before_end_lease", "DONE", 15).await;
    wait_event(&s, &id, "end_lease", "DONE", 15).await;
    assert_eq!(lease_status(&s, &id).await, "TERMINATED");
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert!(after["allocations"].get(rid).is_none(), "addresses given back: {after}");
    let actions: Vec<&str> =
        after["effects"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, vec!["on_start", "before_end", "on_end"]);
    // The log has each hook's answer.
    let (_, log) = s.get("/v1/log?limit=1000", ADMIN).await;
    let finished: Vec<&Value> =
        log["entries"].as_array().unwrap().iter().filter(|e| e["type"] == "LeaseEventFinished").collect();
    assert_eq!(finished.len(), 3);
    assert_eq!(finished[0]["data"]["hooks"][0]["detail"]["addresses"].as_array().unwrap().len(), 2);
    s.replay_verify();
}

#[tokio::test]
async fn sigterm_stops_the_manager_and_the_server() {
    let (_rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &webhook_plugins(&base, "", "", ""));
    let mut s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    // A live tail is open: shutdown must not wait on it.
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let tail = tokio::spawn(sse_collect(format!("{}/v1/log/stream", s.url), None, rx, usize::MAX));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    let status = s.terminate();
    assert!(status.success(), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(10));
    tail.await.unwrap();
}
