//! Splitting a lease and handing it to another project, black box: a real
//! berthd on a real database, callers of several projects and an admin
//! (noauth), driven over HTTP.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;

use berth_testkit::{Server, ADMIN, ALICE, BOB};
use chrono::{DateTime, Duration, DurationRound, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

const CAROL: &str = "carol:p3";

/// `h` hours after a future hour boundary, in Blazar's input format.
fn at(h: i64) -> String {
    let base: DateTime<Utc> = (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap();
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

async fn enrol(s: &Server, n: usize) {
    for i in 0..n {
        let body = json!({"name": format!("h{i}"), "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
        let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
        assert_eq!(st, StatusCode::CREATED, "{host}");
    }
}

async fn hosts_lease(s: &Server, who: &str, name: &str, hosts: u32) -> Value {
    let body = json!({"name": name, "start_date": at(2), "end_date": at(6), "events": [],
        "reservations": [{"resource_type": "physical:host", "min": hosts, "max": hosts,
                          "hypervisor_properties": "", "resource_properties": ""}]});
    let (st, lease) = s.post("/v1/leases", who, body).await;
    assert_eq!(st, StatusCode::CREATED, "{lease}");
    lease["lease"].clone()
}

fn hosts_of(lease: &Value) -> BTreeSet<String> {
    lease["reservations"][0]["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["resource_id"].as_str().unwrap().to_string())
        .collect()
}

async fn show(s: &Server, who: &str, id: &str) -> Value {
    let (st, body) = s.get(&format!("/v1/leases/{id}"), who).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["lease"].clone()
}

async fn host_names(s: &Server) -> Vec<(String, String)> {
    let (_, hosts) = s.get("/v1/os-hosts", ADMIN).await;
    hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["hypervisor_hostname"].as_str().unwrap().to_string(), h["id"].as_str().unwrap().to_string()))
        .collect()
}

fn times(lease: &Value) -> Vec<(String, String)> {
    let mut t: Vec<(String, String)> = lease["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event_type"].as_str().unwrap().to_string(), e["time"].as_str().unwrap().to_string()))
        .collect();
    t.sort();
    t
}

/// The VCPU peak of `project` over the lease's window, as the API reports it.
async fn peak(s: &Server, project: &str) -> i64 {
    let q = format!("?start={}&end={}", at(2).replace(' ', "%20"), at(6).replace(' ', "%20"));
    let (st, body) = s.get(&format!("/v1/quotas/projects/{project}/usage{q}"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["usage"]["VCPU"]["peak"].as_i64().unwrap_or(0)
}

#[tokio::test]
async fn a_split_of_two_hosts_out_of_five_leaves_two_leases_that_add_up() {
    let s = Server::start().await;
    enrol(&s, 6).await;
    let lease = hosts_lease(&s, ALICE, "five", 5).await;
    let (id, rid) = (lease["id"].as_str().unwrap(), lease["reservations"][0]["id"].as_str().unwrap());
    let all = hosts_of(&lease);
    // One host by name, one by id.
    let names = host_names(&s).await;
    let name_of = |id: &str| names.iter().find(|(_, i)| i == id).unwrap().0.clone();
    let moving: Vec<String> = all.iter().take(2).cloned().collect();
    let body = json!({"name": "two", "reservations": [{"id": rid, "hosts": [name_of(&moving[0]), moving[1]]}]});
    let (st, made) = s.post(&format!("/v1/leases/{id}/split"), ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    let made = made["lease"].clone();
    let kept = show(&s, ALICE, id).await;
    let (a, b) = (hosts_of(&kept), hosts_of(&made));
    assert_eq!(b, moving.iter().cloned().collect::<BTreeSet<_>>());
    assert!(a.is_disjoint(&b), "{a:?} {b:?}");
    assert_eq!(a.union(&b).cloned().collect::<BTreeSet<_>>(), all);
    for l in [&kept, &made] {
        assert_eq!(
            (&l["start_date"], &l["end_date"], &l["before_end_date"]),
            (&lease["start_date"], &lease["end_date"], &lease["before_end_date"])
        );
        assert_eq!(times(l), times(&lease));
        assert_eq!((l["status"].as_str(), l["project_id"].as_str()), (Some("PENDING"), Some("p1")));
    }
    assert_ne!(made["reservations"][0]["id"], lease["reservations"][0]["id"]);
    assert_eq!((made["reservations"][0]["min"].clone(), made["reservations"][0]["max"].clone()), (json!(2), json!(2)));
    assert_eq!((kept["reservations"][0]["min"].clone(), kept["reservations"][0]["max"].clone()), (json!(3), json!(3)));
    // The new lease's events are its own, waiting.
    assert!(made["events"].as_array().unwrap().iter().all(|e| e["status"] == "UNDONE"));
    // The log says who split it.
    let split: Vec<Value> = s.log_entries().await.into_iter().filter(|e| e["type"] == "LeaseSplit").collect();
    assert_eq!(split.len(), 1);
    assert_eq!((split[0]["meta"]["actor"].as_str(), split[0]["meta"]["project"].as_str()), (Some("alice"), Some("p1")));
    assert_eq!(split[0]["data"]["from"].as_str(), Some(id));
    s.replay_verify();
}

#[tokio::test]
async fn a_split_into_another_project_fits_its_quota_at_every_instant() {
    let s = Server::start().await;
    enrol(&s, 5).await;
    let lease = hosts_lease(&s, ALICE, "five", 5).await;
    let (id, rid) = (lease["id"].as_str().unwrap(), lease["reservations"][0]["id"].as_str().unwrap());
    // Limits make usage reported; p2 may hold two hosts' VCPUs.
    for (p, limit) in [("p1", 1000), ("p2", 16)] {
        let (st, body) = s.put(&format!("/v1/quotas/projects/{p}"), ADMIN, json!({"quotas": {"VCPU": limit}})).await;
        assert_eq!(st, StatusCode::OK, "{body}");
    }
    assert_eq!((peak(&s, "p1").await, peak(&s, "p2").await), (40, 0));
    let split = |n: u32| json!({"name": "theirs", "project_id": "p2", "reservations": [{"id": rid, "count": n}]});
    let (st, e) = s.post(&format!("/v1/leases/{id}/split"), ADMIN, split(3)).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.quota.exceeded")), "{e}");
    assert!(e["error_message"].as_str().unwrap().contains("p2"), "{e}");
    // Nothing written.
    assert_eq!(hosts_of(&show(&s, ALICE, id).await).len(), 5);
    let (_, listed) = s.get("/v1/leases", ADMIN).await;
    assert_eq!(listed["leases"].as_array().unwrap().len(), 1);
    let (st, made) = s.post(&format!("/v1/leases/{id}/split"), ADMIN, split(2)).await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    assert_eq!((made["lease"]["project_id"].as_str(), made["lease"]["user_id"].as_str()), (Some("p2"), Some("alice")));
    assert_eq!((peak(&s, "p1").await, peak(&s, "p2").await), (24, 16));
    // Bob sees it, alice does not.
    let new_id = made["lease"]["id"].as_str().unwrap();
    assert_eq!(show(&s, BOB, new_id).await["id"].as_str(), Some(new_id));
    let (st, _) = s.get(&format!("/v1/leases/{new_id}"), ALICE).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // A member's split towards p2 stays in p1, offered to p2 (and over p2's quota on acceptance).
    let (st, offered) = s
        .post(
            &format!("/v1/leases/{id}/split"),
            ALICE,
            json!({"name": "offered", "project_id": "p2",
        "reservations": [{"id": rid, "count": 1}]}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{offered}");
    assert_eq!(offered["lease"]["project_id"].as_str(), Some("p1"));
    assert_eq!(offered["lease"]["transfer"]["to_project"].as_str(), Some("p2"));
    let off = offered["lease"]["id"].as_str().unwrap();
    let (st, e) = s.post(&format!("/v1/leases/{off}/transfer/accept"), BOB, json!({})).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.quota.exceeded")), "{e}");
    assert_eq!((peak(&s, "p1").await, peak(&s, "p2").await), (24, 16));
    s.replay_verify();
}

#[tokio::test]
async fn an_instance_reservation_splits_by_slots() {
    let s = Server::start().await;
    let body = json!({"name": "big", "vcpus": 64, "memory_mb": 1_000_000, "local_gb": 10_000});
    assert_eq!(s.post("/v1/os-hosts", ADMIN, body).await.0, StatusCode::CREATED);
    let body = json!({"name": "vms", "start_date": at(2), "end_date": at(6), "events": [],
        "reservations": [{"resource_type": "virtual:instance", "amount": 4, "vcpus": 2, "memory_mb": 16,
                          "disk_gb": 1, "affinity": null}]});
    let (st, lease) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{lease}");
    let (id, rid) = (lease["lease"]["id"].as_str().unwrap(), lease["lease"]["reservations"][0]["id"].as_str().unwrap());
    let body = json!({"name": "one", "reservations": [{"id": rid, "count": 1}]});
    let (st, made) = s.post(&format!("/v1/leases/{id}/split"), ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    let kept = show(&s, ALICE, id).await;
    let slots = |l: &Value| l["reservations"][0]["allocations"].as_array().unwrap().len();
    assert_eq!((slots(&kept), slots(&made["lease"])), (3, 1));
    assert_eq!(
        (kept["reservations"][0]["amount"].clone(), made["lease"]["reservations"][0]["amount"].clone()),
        (json!(3), json!(1))
    );
    assert_eq!(made["lease"]["reservations"][0]["vcpus"], json!(2));
    s.replay_verify();
}

async fn transfer(s: &Server, who: &str, id: &str, body: Value) -> (StatusCode, Value) {
    s.post(&format!("/v1/leases/{id}/transfer"), who, body).await
}

async fn accept(s: &Server, who: &str, id: &str) -> (StatusCode, Value) {
    s.post(&format!("/v1/leases/{id}/transfer/accept"), who, json!({})).await
}

#[tokio::test]
async fn a_transfer_needs_the_owner_and_the_target_or_an_admin() {
    let s = Server::start().await;
    enrol(&s, 4).await;
    let lease = hosts_lease(&s, ALICE, "mine", 1).await;
    let id = lease["id"].as_str().unwrap();
    let no_consent = |(st, e): (StatusCode, Value)| {
        assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.transfer.no_consent")), "{e}");
    };
    // A member may not move it at once; the target may not pull it.
    no_consent(transfer(&s, ALICE, id, json!({"project_id": "p2", "consent": "immediate"})).await);
    no_consent(transfer(&s, BOB, id, json!({"project_id": "p2"})).await);
    // Nothing is offered to p2 yet: it does not learn the lease exists.
    assert_eq!(accept(&s, BOB, id).await.0, StatusCode::NOT_FOUND);
    let (st, offered) = transfer(&s, ALICE, id, json!({"project_id": "p2"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{offered}");
    assert_eq!((offered["lease_id"].as_str(), offered["transfer"]["to_project"].as_str()), (Some(id), Some("p2")));
    assert_eq!(show(&s, ALICE, id).await["transfer"]["offered_by"].as_str(), Some("alice"));
    // A third project awaiting nothing gets 404; awaiting another lease, 403.
    assert_eq!(accept(&s, CAROL, id).await.0, StatusCode::NOT_FOUND);
    let other = hosts_lease(&s, ALICE, "other", 1).await;
    let other_id = other["id"].as_str().unwrap();
    assert_eq!(transfer(&s, ALICE, other_id, json!({"project_id": "p3"})).await.0, StatusCode::ACCEPTED);
    no_consent(accept(&s, CAROL, id).await);
    // The owner cannot accept for the target.
    no_consent(accept(&s, ALICE, id).await);
    // Whom the lease is shared with is the new owner's to say: the old
    // owner's list (the new owner in it) goes with the transfer.
    let (st, shared) = s.put(&format!("/v1/leases/{id}/shared_with"), ALICE, json!({"projects": ["p2", "p9"]})).await;
    assert_eq!(st, StatusCode::OK, "{shared}");
    let (st, moved) = accept(&s, BOB, id).await;
    assert_eq!(st, StatusCode::OK, "{moved}");
    assert_eq!(show(&s, BOB, id).await["shared_with"], json!([]));
    assert_eq!((moved["lease"]["project_id"].as_str(), moved["lease"]["user_id"].as_str()), (Some("p2"), Some("bob")));
    assert!(moved["lease"].get("transfer").is_none(), "{moved}");
    assert_eq!(s.get(&format!("/v1/leases/{id}"), ALICE).await.0, StatusCode::NOT_FOUND);
    assert_eq!(hosts_of(&show(&s, BOB, id).await), hosts_of(&lease));
    // Withdrawn, an offer is gone.
    assert_eq!(s.delete(&format!("/v1/leases/{other_id}/transfer"), ALICE).await.0, StatusCode::NO_CONTENT);
    assert_eq!(accept(&s, CAROL, other_id).await.0, StatusCode::NOT_FOUND);
    let (st, e) = s.delete(&format!("/v1/leases/{other_id}/transfer"), ALICE).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::NOT_FOUND, Some("berth.transfer.not_found")), "{e}");
    // An admin moves it at once; its user stays.
    let (st, moved) = transfer(&s, ADMIN, other_id, json!({"project_id": "p3"})).await;
    assert_eq!(st, StatusCode::OK, "{moved}");
    assert_eq!(
        (moved["lease"]["project_id"].as_str(), moved["lease"]["user_id"].as_str()),
        (Some("p3"), Some("alice"))
    );
    // The log says who did what.
    let log = s.log_entries().await;
    let of = |t: &str| log.iter().filter(|e| e["type"] == t).cloned().collect::<Vec<_>>();
    let moves = of("LeaseTransferred");
    assert_eq!(moves.len(), 2);
    assert_eq!(
        (moves[0]["meta"]["actor"].as_str(), moves[0]["data"]["from_project"].as_str()),
        (Some("bob"), Some("p1"))
    );
    assert_eq!(moves[1]["meta"]["causation"].as_str(), Some("berth:leases:transfer_without_consent"));
    assert_eq!(of("LeaseTransferOffered").len(), 2);
    assert_eq!(of("LeaseTransferWithdrawn")[0]["meta"]["actor"].as_str(), Some("alice"));
    s.replay_verify();
}

#[tokio::test]
async fn a_started_lease_is_neither_split_nor_transferred() {
    let s = Server::start().await;
    enrol(&s, 2).await;
    let body = json!({"name": "now", "start_date": "now", "end_date": at(6), "events": [],
        "reservations": [{"resource_type": "physical:host", "min": 2, "max": 2,
                          "hypervisor_properties": "", "resource_properties": ""}]});
    let (st, lease) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{lease}");
    let (id, rid) = (lease["lease"]["id"].as_str().unwrap(), lease["lease"]["reservations"][0]["id"].as_str().unwrap());
    let body = json!({"name": "part", "reservations": [{"id": rid, "count": 1}]});
    for (st, e) in [
        s.post(&format!("/v1/leases/{id}/split"), ALICE, body).await,
        transfer(&s, ALICE, id, json!({"project_id": "p2"})).await,
        transfer(&s, ADMIN, id, json!({"project_id": "p2"})).await,
    ] {
        assert_eq!((st, e["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lease.started")), "{e}");
        assert!(e["error_message"].as_str().unwrap().contains("before its start"), "{e}");
    }
}

#[tokio::test]
async fn bad_splits_and_transfers_are_refused_and_write_nothing() {
    let s = Server::start().await;
    enrol(&s, 3).await;
    let lease = hosts_lease(&s, ALICE, "three", 3).await;
    let (id, rid) = (lease["id"].as_str().unwrap(), lease["reservations"][0]["id"].as_str().unwrap());
    let before = s.log_entries().await.len();
    let many: Vec<String> = (0..1000).map(|i| format!("h{i}")).collect();
    let split = format!("/v1/leases/{id}/split");
    let cases = [
        (json!({"name": "x", "reservations": [{"id": rid, "count": 1}], "colour": "red"}), 400, "berth.unknown_key"),
        (json!({"name": "x", "reservations": [{"id": rid, "count": 1, "why": 1}]}), 400, "berth.unknown_key"),
        (json!({"name": "x", "reservations": []}), 400, "berth.lease.invalid"),
        (json!({"name": "x"}), 400, "berth.lease.invalid"),
        (json!({"reservations": [{"id": rid, "count": 1}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": rid, "count": 0}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": rid, "count": -1}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": rid}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": rid, "count": 1, "hosts": ["h0"]}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": rid, "hosts": many}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": uuid::Uuid::nil(), "count": 1}]}), 400, "berth.lease.invalid"),
        (json!({"name": "x", "reservations": [{"id": rid, "count": 3}]}), 409, "berth.lease.split_refused"),
        (json!({"name": "x", "reservations": [{"id": rid, "count": 4_000}]}), 409, "berth.lease.split_refused"),
        (json!({"name": "x", "reservations": [{"id": rid, "hosts": ["nope"]}]}), 409, "berth.lease.split_refused"),
        (json!({"name": "three", "reservations": [{"id": rid, "count": 1}]}), 409, "berth.lease.duplicate_name"),
    ];
    for (body, status, code) in cases {
        let (st, e) = s.post(&split, ALICE, body.clone()).await;
        assert_eq!((st.as_u16(), e["code"].as_str()), (status, Some(code)), "{body}: {e}");
    }
    let transfers = [
        (json!({"project_id": "p2", "colour": "red"}), 400, "berth.unknown_key"),
        (json!({}), 400, "berth.lease.invalid"),
        (json!({"project_id": ""}), 400, "berth.lease.invalid"),
        (json!({"project_id": "p1"}), 400, "berth.lease.invalid"),
        (json!({"project_id": "p2", "consent": "maybe"}), 400, "berth.lease.invalid"),
        (json!({"project_id": "p2", "user_id": "bob"}), 400, "berth.lease.invalid"),
    ];
    for (body, status, code) in transfers {
        let (st, e) = transfer(&s, ALICE, id, body.clone()).await;
        assert_eq!((st.as_u16(), e["code"].as_str()), (status, Some(code)), "{body}: {e}");
    }
    assert_eq!(s.log_entries().await.len(), before, "a refusal wrote to the log");
    assert_eq!(hosts_of(&show(&s, ALICE, id).await), hosts_of(&lease));
    s.assert_no_panic();
}

#[tokio::test]
async fn the_cli_splits_offers_and_accepts() {
    let s = Server::start().await;
    enrol(&s, 3).await;
    let lease = hosts_lease(&s, ALICE, "three", 3).await;
    let id = lease["id"].as_str().unwrap();
    let made = berth_testkit::berth_json(&s, ALICE, &["lease", "split", "three", "--name", "one", "--count", "1"]);
    assert_eq!(made["reservations"][0]["allocations"].as_array().unwrap().len(), 1, "{made}");
    let offered = berth_testkit::berth_json(&s, ALICE, &["lease", "transfer", id, "--project", "p2"]);
    assert_eq!(offered["transfer"]["to_project"].as_str(), Some("p2"), "{offered}");
    let moved = berth_testkit::berth_json(&s, BOB, &["lease", "accept", id]);
    assert_eq!((moved["project_id"].as_str(), moved["user_id"].as_str()), (Some("p2"), Some("bob")), "{moved}");
    let (ok, _, err) = berth_testkit::berth(&s, BOB, &["lease", "transfer", id, "--withdraw"]);
    assert!(!ok && err.contains("berth.transfer.not_found"), "{err}");
    s.replay_verify();
}
