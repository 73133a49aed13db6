//! Sharing a lease, black box: a real berthd on a real database, the test
//! drawing through Placement as Nova would (`CUSTOM_RESERVATION_<id>`), and
//! a real HTTP receiver standing in for the compute service the host
//! plugin tells of the pool's tenants.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::receiver;
use berth_testkit::{Server, ADMIN, ALICE, BOB};
use chrono::{SecondsFormat, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

const CAROL: &str = "carol:p3";

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

async fn enrol(s: &Server, name: &str) -> String {
    let (st, host) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100})).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

async fn create(s: &Server, name: &str, start: &str, reservation: Value) -> Value {
    let body = json!({"name": name, "start_date": start, "end_date": in_secs(600), "reservations": [reservation]});
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    l["lease"].clone()
}

async fn share(s: &Server, id: &str, token: &str, body: Value) -> (StatusCode, Value) {
    s.put(&format!("/v1/leases/{id}/shared_with"), token, body).await
}

/// A consumer of `project` drawing `vcpus` from the reservation's class on
/// `host`, as Nova claims an instance of a Blazar flavor.
async fn draw(s: &Server, consumer: Uuid, project: &str, host: &str, class: &str, vcpus: i64) -> (StatusCode, Value) {
    let body = json!({"allocations": {host: {"resources": {"VCPU": vcpus, class: 1}}},
                      "project_id": project, "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"});
    s.placement(Method::PUT, &format!("/allocations/{consumer}"), ADMIN, "1.38", body).await
}

async fn log_length(s: &Server) -> i64 {
    let (c, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.query_one("SELECT count(*) FROM log_events", &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_shared_lease_is_drawn_from_by_the_project_named_and_no_other() {
    let s = Server::start().await;
    let host = enrol(&s, "h").await;
    let reservation =
        json!({"resource_type": "virtual:instance", "amount": 1, "vcpus": 4, "memory_mb": 1024, "disk_gb": 10});
    let l = create(&s, "mine", "now", reservation).await;
    let id = l["id"].as_str().unwrap().to_string();
    let rid: Uuid = l["reservations"][0]["id"].as_str().unwrap().parse().unwrap();
    let class = berth_core::lease::reservation_class(rid);
    assert_eq!(l["shared_with"], json!([]));

    let (st, body) = share(&s, &id, ALICE, json!({"projects": ["p2"]})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"lease_id": id, "shared_with": ["p2"]}));
    let (_, shown) = s.get(&format!("/v1/leases/{id}"), ALICE).await;
    assert_eq!(shown["lease"]["shared_with"], json!(["p2"]));

    // Bad lists are refused with a code and write nothing.
    let written = log_length(&s).await;
    let many: Vec<String> = (0..101).map(|i| format!("p{}", i + 10)).collect();
    for (bad, code) in [
        (json!({"projects": many}), "berth.share.invalid"),
        (json!({"projects": ["p1"]}), "berth.share.invalid"),
        (json!({"projects": ["p2", "p2"]}), "berth.share.invalid"),
        (json!({"projects": ["not a project"]}), "berth.share.invalid"),
        (json!({"projects": "p2"}), "berth.share.invalid"),
        (json!({}), "berth.share.invalid"),
        (json!({"projects": [], "tenants": []}), "berth.unknown_key"),
    ] {
        let (st, body) = share(&s, &id, ALICE, bad.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["code"], code, "{bad}: {body}");
    }
    assert_eq!(log_length(&s).await, written);
    // Another project sees nothing of the lease, sharing or not.
    for token in [BOB, CAROL] {
        assert_eq!(s.get(&format!("/v1/leases/{id}"), token).await.0, StatusCode::NOT_FOUND);
        assert_eq!(share(&s, &id, token, json!({"projects": []})).await.0, StatusCode::NOT_FOUND);
    }

    // p2's instance draws from the reservation; p3's is refused.
    let b1 = Uuid::new_v4();
    let (st, body) = draw(&s, b1, "p2", &host, &class, 2).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    let (st, body) = draw(&s, Uuid::new_v4(), "p3", &host, &class, 2).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");
    // Placement's document keeps Placement's codes: the refusal is the one
    // any other project's draw gets.
    assert!(body["errors"][0]["detail"].as_str().unwrap().contains("belongs to another project"), "{body}");

    // p2 sees it as shared with it, without the owner's project or name.
    let (st, list) = s.get("/v1/leases/shared", BOB).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    let seen = &list["leases"][0];
    assert_eq!(seen["id"], json!(id));
    assert_eq!(seen["shared"], true);
    assert_eq!(seen["reservations"][0]["resource_class"], json!(class));
    assert_eq!(seen["reservations"][0]["amount"], 1);
    for hidden in ["project_id", "user_id", "name", "events"] {
        assert!(seen.get(hidden).is_none(), "{hidden} shown: {seen}");
    }
    assert!(!list.to_string().contains("mine"), "{list}");
    assert_eq!(s.get("/v1/leases/shared", CAROL).await.1["leases"], json!([]));

    // Unshared: p2's instance keeps its draw, a new one is refused.
    let (st, body) = share(&s, &id, ALICE, json!({"projects": []})).await;
    assert_eq!((st, &body["shared_with"]), (StatusCode::OK, &json!([])), "{body}");
    let (st, body) = draw(&s, Uuid::new_v4(), "p2", &host, &class, 1).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");
    assert!(body["errors"][0]["detail"].as_str().unwrap().contains("belongs to another project"), "{body}");
    let (st, kept) = s.placement(Method::GET, &format!("/allocations/{b1}"), ADMIN, "1.38", json!(null)).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(kept["allocations"][&host]["resources"]["VCPU"], 2, "{kept}");
    assert_eq!(s.get("/v1/leases/shared", BOB).await.1["leases"], json!([]));
    s.replay_verify();
}

async fn wait_status(s: &Server, id: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, l) = s.get(&format!("/v1/leases/{id}"), ADMIN).await;
        if l["lease"]["status"] == status {
            return;
        }
        assert!(Instant::now() < deadline, "lease {id} never {status}: {l}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_host_lease_tells_the_pool_its_tenants_at_start_and_at_each_share() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    enrol(&s, "a").await;
    let l = create(&s, "hosts", &in_secs(2), json!({"resource_type": "physical:host", "min": 1, "max": 1})).await;
    let id = l["id"].as_str().unwrap().to_string();
    let pool = l["reservations"][0]["resource_id"].clone();
    // Shared before its start: the start tells the tenants, once.
    assert_eq!(share(&s, &id, ALICE, json!({"projects": ["p2"]})).await.0, StatusCode::OK);
    wait_status(&s, &id, "ACTIVE").await;
    let starts = rx.calls_of("on_start");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].payload["pool"], pool);
    assert_eq!(starts[0].payload["metadata"], json!({"filter_tenant_id": "p1", "filter_tenant_id2": "p2"}));
    assert_eq!(starts[0].payload["lease"]["shared_with"], json!(["p2"]));

    // Shared anew while it runs: one update call with the whole list.
    assert_eq!(share(&s, &id, ALICE, json!({"projects": ["p3", "p2"]})).await.0, StatusCode::OK);
    rx.wait_for(10, "the update call", |c| c.iter().any(|c| c.action == "update")).await;
    // The same list again is no change: no call.
    assert_eq!(share(&s, &id, ALICE, json!({"projects": ["p2", "p3"]})).await.0, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let updates = rx.calls_of("update");
    assert_eq!(updates.len(), 1, "{:?}", updates.iter().map(|c| &c.payload).collect::<Vec<_>>());
    let want = json!({"filter_tenant_id": "p1", "filter_tenant_id2": "p2", "filter_tenant_id3": "p3"});
    assert_eq!(updates[0].payload["metadata"], want);
    assert_eq!(updates[0].payload["pool"], pool);
    assert_eq!(rx.calls_of("on_start").len(), 1);

    // Once ended, it is shared no more.
    let (st, _) = s.post(&format!("/v1/leases/{id}/end"), ADMIN, json!({})).await;
    assert_eq!(st, StatusCode::OK);
    wait_status(&s, &id, "TERMINATED").await;
    let (st, body) = share(&s, &id, ALICE, json!({"projects": []})).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "berth.share.lease_over", "{body}");
    s.replay_verify();
}
