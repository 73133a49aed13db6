//! Healing, black box: a real berthd on a real database, hosts made
//! unusable by an admin or through `/placement` (Nova's trait), and a real
//! HTTP receiver standing in for the compute service the host plugin acts
//! on.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::receiver;
use berth_testkit::{Server, ADMIN, ALICE};
use chrono::{SecondsFormat, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

/// berthd with quick polls, the host plugin acting through the receiver.
fn config(dir: &tempfile::TempDir, base: &str) -> PathBuf {
    let path = dir.path().join("berth.toml");
    let text = format!(
        "[manager]\npoll_interval_ms = 250\nclaim_ttl_ms = 2000\nretry_min_ms = 50\nretry_max_ms = 200\n\n\
         [plugins]\nenabled = [\"physical:host\", \"virtual:instance\"]\n\
         [plugins.drivers.\"physical:host\"]\ndriver = \"webhook\"\nurl = \"{base}/hook\"\ntimeout_ms = 5000\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn in_secs(s: i64) -> String {
    (Utc::now() + chrono::Duration::seconds(s)).to_rfc3339_opts(SecondsFormat::Micros, true)
}

async fn enrol(s: &Server, name: &str, caps: Value) -> String {
    let mut body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    body.as_object_mut().unwrap().extend(caps.as_object().unwrap().clone());
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

/// A lease of `n` hosts with `"kind": kind` from `start` seconds on, for
/// `secs` seconds; its JSON.
async fn lease(s: &Server, name: &str, n: u32, kind: &str, start: i64, extra: Value) -> Value {
    let mut r = json!({"resource_type": "physical:host", "min": n, "max": n,
                       "resource_properties": format!("[\"==\", \"$kind\", \"{kind}\"]")});
    r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let start_date = if start == 0 { "now".to_string() } else { in_secs(start) };
    let (st, l) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": name, "start_date": start_date, "end_date": in_secs(600),
                                          "reservations": [r]}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    l["lease"].clone()
}

async fn show(s: &Server, id: &str) -> Value {
    let (st, l) = s.get(&format!("/v1/leases/{id}"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{l}");
    l["lease"].clone()
}

fn hosts_of(l: &Value) -> Vec<String> {
    let mut h: Vec<String> = l["reservations"][0]["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["resource_id"].as_str().unwrap().to_string())
        .collect();
    h.sort();
    h
}

async fn wait_start(s: &Server, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while show(s, id).await["status"] != "ACTIVE" {
        assert!(Instant::now() < deadline, "lease {id} never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn disable(s: &Server, host: &str, disabled: bool) -> Value {
    let (st, body) = s.put(&format!("/v1/os-hosts/{host}"), ADMIN, json!({"disabled": disabled})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body
}

async fn pools(s: &Server, host: &str) -> Vec<Uuid> {
    s.db.store(1).host_pools(host.parse().unwrap()).await.unwrap()
}

#[tokio::test]
async fn a_disabled_host_under_an_active_lease_is_replaced_and_the_pool_moves_once() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    let a = enrol(&s, "a", json!({"kind": "gpu"})).await;
    let b = enrol(&s, "b", json!({"kind": "gpu"})).await;
    let l = lease(&s, "running", 1, "gpu", 0, json!({})).await;
    let id = l["id"].as_str().unwrap().to_string();
    let pool: Uuid = l["reservations"][0]["resource_id"].as_str().unwrap().parse().unwrap();
    wait_start(&s, &id).await;
    let held = hosts_of(&show(&s, &id).await);
    let (failed, spare) = if held == [a.clone()] { (a, b) } else { (b, a) };
    assert_eq!(pools(&s, &failed).await, vec![pool]);

    let asked = Instant::now();
    let answer = disable(&s, &failed, true).await;
    let replaced_in = asked.elapsed();
    assert_eq!(answer["host"]["disabled"], true);
    assert_eq!(answer["host"]["disabled_reason"], "admin");
    assert_eq!(
        answer["healed"],
        json!([{"lease_id": id, "reservation_id": l["reservations"][0]["id"],
                                          "moved": 1, "missing": 0}])
    );
    let now = show(&s, &id).await;
    println!("replaced {replaced_in:?} after the disable was asked for");
    assert!(replaced_in < Duration::from_secs(1), "replaced only after {replaced_in:?}");
    assert_eq!(hosts_of(&now), vec![spare.clone()]);
    assert_eq!(now["degraded"], true);
    assert_eq!(now["reservations"][0]["resources_changed"], true);
    assert_eq!(now["reservations"][0]["missing_resources"], false);

    // The plugin's on_heal: one call at the receiver, the new host joins
    // the lease's pool and the failed one leaves it.
    rx.wait_for(10, "the heal call", |c| c.iter().any(|c| c.action == "heal")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while pools(&s, &spare).await != vec![pool] {
        assert!(Instant::now() < deadline, "the spare never joined the pool");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pools(&s, &failed).await, vec![berth_core::lease::FREE_POOL]);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let heals = rx.calls_of("heal");
    assert_eq!(heals.len(), 1, "{:?}", heals.iter().map(|c| &c.payload).collect::<Vec<_>>());
    let p = &heals[0].payload;
    assert_eq!(p["pool"], json!(pool));
    assert_eq!(p["hosts"][0]["resource_provider"]["uuid"], json!(spare));
    assert_eq!(p["leave"][0]["resource_provider"]["uuid"], json!(failed));

    // Unusable: nothing new is placed on it; enabled again, it is, and
    // nothing moves back.
    let (st, refused) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": "more", "start_date": "now", "end_date": in_secs(60),
              "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}),
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{refused}");
    disable(&s, &failed, false).await;
    assert_eq!(hosts_of(&show(&s, &id).await), vec![spare]);
    lease(&s, "more", 1, "gpu", 0, json!({})).await;
    s.replay_verify();
}

#[tokio::test]
async fn a_reservation_that_says_heal_false_keeps_its_host_and_is_only_marked() {
    let s = Server::start().await;
    let a = enrol(&s, "a", json!({"kind": "x"})).await;
    enrol(&s, "b", json!({"kind": "x"})).await;
    let l = lease(&s, "static", 1, "x", 30, json!({"heal": false})).await;
    let id = l["id"].as_str().unwrap().to_string();
    let held = hosts_of(&l);
    let body = disable(&s, &held[0], true).await;
    assert_eq!(body["healed"][0]["moved"], 0);
    assert_eq!(body["healed"][0]["missing"], 1);
    let now = show(&s, &id).await;
    assert_eq!(hosts_of(&now), held, "kept its host");
    assert_eq!(now["degraded"], true);
    assert_eq!(now["reservations"][0]["missing_resources"], true);
    assert_eq!(now["reservations"][0]["heal"], false);
    // Enabled again: nothing is missing any more.
    disable(&s, &held[0], false).await;
    let now = show(&s, &id).await;
    assert_eq!(now["reservations"][0]["missing_resources"], false);
    let _ = a;
    s.replay_verify();
}

#[tokio::test]
async fn a_lease_with_no_fitting_host_stays_degraded_until_one_frees() {
    let dir = tempfile::tempdir().unwrap();
    let (_rx, base) = receiver::start().await;
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    enrol(&s, "a", json!({"kind": "y"})).await;
    enrol(&s, "b", json!({"kind": "y"})).await;
    let waiting = lease(&s, "waiting", 1, "y", 60, json!({})).await;
    let blocker = lease(&s, "blocker", 1, "y", 60, json!({})).await;
    let held = hosts_of(&waiting);
    let body = disable(&s, &held[0], true).await;
    assert_eq!(body["healed"][0]["missing"], 1);
    let id = waiting["id"].as_str().unwrap();
    let now = show(&s, id).await;
    assert_eq!(now["degraded"], true);
    assert_eq!(now["reservations"][0]["missing_resources"], true);
    // The log says why (a reader sees it once no older transaction runs).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, log) = s.get("/v1/log?limit=10000", ADMIN).await;
        if log.to_string().contains("ReservationUnhealed") {
            break;
        }
        assert!(Instant::now() < deadline, "no ReservationUnhealed in the log: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The other lease goes: its host frees, and the manager heals.
    let (st, _) = s.delete(&format!("/v1/leases/{}", blocker["id"].as_str().unwrap()), ALICE).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = show(&s, id).await;
        if now["reservations"][0]["missing_resources"] == false {
            assert_ne!(hosts_of(&now), held);
            break;
        }
        assert!(Instant::now() < deadline, "never healed: {now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.replay_verify();
}

#[tokio::test]
async fn nova_disabling_a_compute_service_through_placement_heals() {
    let s = Server::start().await;
    let a = enrol(&s, "a", json!({"kind": "z"})).await;
    let b = enrol(&s, "b", json!({"kind": "z"})).await;
    let l = lease(&s, "nova", 1, "z", 30, json!({})).await;
    let held = hosts_of(&l)[0].clone();
    let other = if held == a { b } else { a };
    let placement = |method: reqwest::Method, path: String| {
        reqwest::Client::new()
            .request(method, format!("{}/placement{path}", s.url))
            .header("x-auth-token", ADMIN)
            .header("openstack-api-version", "placement 1.39")
    };
    let rp: Value = placement(reqwest::Method::GET, format!("/resource_providers/{held}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let put = placement(reqwest::Method::PUT, format!("/resource_providers/{held}/traits"))
        .json(&json!({"traits": ["COMPUTE_STATUS_DISABLED"], "resource_provider_generation": rp["generation"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::OK, "{}", put.text().await.unwrap());
    let now = show(&s, l["id"].as_str().unwrap()).await;
    assert_eq!(hosts_of(&now), vec![other]);
    assert_eq!(now["degraded"], true);
    let (_, h) = s.get(&format!("/v1/os-hosts/{held}"), ADMIN).await;
    assert_eq!(h["host"]["disabled_reason"], "COMPUTE_STATUS_DISABLED");
    s.replay_verify();
}

#[tokio::test]
async fn a_host_a_plugin_reports_failed_is_disabled_and_healed() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    let a = enrol(&s, "a", json!({"kind": "w"})).await;
    let b = enrol(&s, "b", json!({"kind": "w"})).await;
    let l = lease(&s, "reported", 1, "w", 2, json!({})).await;
    let id = l["id"].as_str().unwrap().to_string();
    let held = hosts_of(&l)[0].clone();
    let other = if held == a { b } else { a };
    // The compute service answers the start: this host's disk is gone.
    let start = l["events"].as_array().unwrap().iter().find(|e| e["event_type"] == "start_lease").unwrap();
    let key = format!("{}:{}", start["id"].as_str().unwrap(), l["reservations"][0]["id"].as_str().unwrap());
    rx.applied
        .lock()
        .unwrap()
        .insert(key, ("on_start".into(), json!({"failed_hosts": [{"uuid": held, "reason": "disk gone"}]})));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = show(&s, &id).await;
        if hosts_of(&now) == vec![other.clone()] {
            assert_eq!(now["degraded"], true);
            break;
        }
        assert!(Instant::now() < deadline, "never healed: {now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, h) = s.get(&format!("/v1/os-hosts/{held}"), ADMIN).await;
    assert_eq!(h["host"]["disabled"], true);
    assert_eq!(h["host"]["disabled_reason"], "plugin: disk gone");
    s.replay_verify();
}

/// Two leases on two hosts, two spare hosts; a maintenance window over the
/// leases' hosts, with `heal` as given: the answer.
async fn maintenance_over_two_leases(s: &Server, heal: bool) -> (Vec<String>, Vec<String>, Value) {
    for h in ["m1", "m2", "m3", "m4"] {
        enrol(s, h, json!({"kind": "m"})).await;
    }
    let (l1, l2) = (lease(s, "one", 1, "m", 60, json!({})).await, lease(s, "two", 1, "m", 60, json!({})).await);
    let ids = vec![l1["id"].as_str().unwrap().to_string(), l2["id"].as_str().unwrap().to_string()];
    let held = vec![hosts_of(&l1)[0].clone(), hosts_of(&l2)[0].clone()];
    let body = json!({"hosts": held, "start_date": in_secs(120), "end_date": in_secs(300), "heal": heal,
                      "reason": "firmware"});
    let (st, made) = s.post("/v1/maintenance", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    let mut hit: Vec<String> =
        made["leases"].as_array().unwrap().iter().map(|l| l["lease_id"].as_str().unwrap().to_string()).collect();
    hit.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(hit, want, "the answer lists both leases: {made}");
    (ids, held, made)
}

#[tokio::test]
async fn a_maintenance_window_over_two_leases_lists_and_flags_both() {
    let s = Server::start().await;
    let (ids, held, made) = maintenance_over_two_leases(&s, false).await;
    assert!(made["leases"].as_array().unwrap().iter().all(|l| l["missing"] == 1 && l["moved"] == 0), "{made}");
    for (id, host) in ids.iter().zip(&held) {
        let l = show(&s, id).await;
        assert_eq!(l["degraded"], true);
        assert_eq!(l["reservations"][0]["missing_resources"], true);
        assert_eq!(hosts_of(&l), vec![host.clone()], "only flagged, not moved");
    }
    // Members may not; the window is listed; the two spares are all that
    // can be placed over it.
    let (st, _) = s.post("/v1/maintenance", ALICE, json!({"hosts": held})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (_, list) = s.get("/v1/maintenance", ADMIN).await;
    assert_eq!(list["maintenance"][0]["reason"], "firmware");
    let (st, three) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": "three", "start_date": in_secs(150), "end_date": in_secs(200),
              "reservations": [{"resource_type": "physical:host", "min": 3, "max": 3}]}),
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{three}");
    lease(&s, "two-more", 2, "m", 150, json!({})).await;
    s.replay_verify();
}

#[tokio::test]
async fn a_maintenance_window_with_heal_moves_the_leases_it_hits() {
    let s = Server::start().await;
    let (ids, held, made) = maintenance_over_two_leases(&s, true).await;
    assert!(made["leases"].as_array().unwrap().iter().all(|l| l["moved"] == 1 && l["missing"] == 0), "{made}");
    for id in &ids {
        let l = show(&s, id).await;
        assert!(!held.contains(&hosts_of(&l)[0]), "moved off the hosts under maintenance: {l}");
        assert_eq!(l["reservations"][0]["missing_resources"], false);
        assert_eq!(l["degraded"], true);
    }
    // Cancelled: the hosts can be placed again.
    let id = made["maintenance"]["id"].as_str().unwrap();
    let (st, _) = s.delete(&format!("/v1/maintenance/{id}"), ADMIN).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    lease(&s, "after", 2, "m", 150, json!({})).await;
    s.replay_verify();
}

/// A window that ends by its start, or names no host, is a 400 with its
/// code and writes nothing (the reservations it would hit were once read
/// first, over a range PostgreSQL refused: a 500).
#[tokio::test]
async fn a_maintenance_window_that_ends_by_its_start_is_400_and_writes_nothing() {
    let s = Server::start().await;
    let host = enrol(&s, "w1", json!({})).await;
    let before = s.log_entries().await.len();
    let (soon, later) = (in_secs(300), in_secs(600));
    for body in [
        json!({"hosts": [host], "start_date": later, "end_date": soon}),
        json!({"hosts": [host], "start_date": later, "end_date": later}),
        json!({"hosts": [], "start_date": in_secs(300), "end_date": in_secs(600)}),
    ] {
        let (st, err) = s.post("/v1/maintenance", ADMIN, body.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert_eq!(err["code"], "berth.maintenance.invalid", "{body}: {err}");
    }
    let after = s.log_entries().await;
    assert_eq!(after.len(), before, "nothing written: {:?}", &after[before.min(after.len())..]);
    assert!(s.get("/v1/maintenance", ADMIN).await.1["maintenance"].as_array().unwrap().is_empty());
}
