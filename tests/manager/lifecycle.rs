//! A lease's life through the manager: starting, ending by each policy of its
//! hosts, an external plugin, and the daemon stopping on SIGTERM.

use super::*;

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
async fn the_example_external_plugin_goes_through_a_whole_lease() {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins/floatingip/floatingip.py");
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
    // Its before-end seconds after "now": the request may take a second
    // on a busy machine, and a before-end date before the start is refused.
    let l = create(
        &s,
        ALICE,
        json!({"name": "fip", "start_date": "now", "end_date": in_secs(5), "before_end_date": in_secs(3),
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
    let log = s.log_entries().await;
    let finished: Vec<&Value> = log.iter().filter(|e| e["type"] == "LeaseEventFinished").collect();
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

/// Berth reads what a plugin answers by the protocol: a validate answer
/// that is not a resource request fails the lease's creation, naming what is
/// wrong; a hook answer that is not JSON ends the lease event in ERROR with
/// the reason, shown to the lease's project. Never a panic.
#[tokio::test]
async fn malformed_plugin_answers_are_errors_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins/broken/broken.py");
    let plugins = format!(
        r#"[plugins]
enabled = ["physical:host", "x:shape", "x:stray"]
[plugins.external."x:shape"]
driver = "exec"
program = "{0}"
args = ["shape"]
[plugins.external."x:stray"]
driver = "exec"
program = "{0}"
args = ["stray-output"]
"#,
        script.display()
    );
    let cfg = config(&dir, &plugins);
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let lease = |t: &str| {
        json!({"name": t, "start_date": "now", "end_date": in_secs(3600),
               "reservations": [{"resource_type": t, "amount": 1}]})
    };
    let (st, e) = s.post("/v1/leases", ALICE, lease("x:shape")).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{e}");
    // The plugin's fault, not the client's: the client gets the request id,
    // the operator's log the reason.
    let request_id = e["request_id"].as_str().unwrap();
    let logged = s.log();
    let line = logged.lines().find(|l| l.contains(request_id) && l.contains("answered validate")).unwrap_or_default();
    assert!(line.contains(r#"a \"slots\" answer needs \"amount\", \"resources\""#), "{logged}");
    let l = create(&s, ALICE, lease("x:stray")).await;
    let id = l["id"].as_str().unwrap();
    let event = wait_event(&s, id, "start_lease", "ERROR", 20).await;
    assert_eq!(event["attempts"], 1, "not JSON is not mended by a retry: {event}");
    let (_, body) = s.get("/v1/events?status=ERROR", ALICE).await;
    let error = body["events"][0]["last_error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("answered success, but not in JSON") && error.contains("OK"), "{body}");
    assert!(!s.log().contains("panicked"), "no panic");
}
