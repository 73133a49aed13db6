//! Lending idle capacity, black box: a real berthd on a real database,
//! preemptible consumers claimed through `/placement` as Nova would (with
//! `consumer_type` PREEMPTIBLE), owners' leases from `/v1/leases`, and a real
//! HTTP receiver standing in for Nova, which the instance plugin's
//! `on_reclaim` deletes the preemptible servers through.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::receiver::{self, Receiver};
use berth_testkit::{Server, ADMIN, ALICE};
use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

/// The reclaim lead the tests run with, in seconds.
const LEAD: i64 = 2;

/// berthd with quick polls, a short lead, the instance plugin acting
/// through the receiver.
fn config(dir: &tempfile::TempDir, base: &str) -> PathBuf {
    let path = dir.path().join("berth.toml");
    let text = format!(
        "[manager]\npoll_interval_ms = 100\nclaim_ttl_ms = 2000\nretry_min_ms = 50\nretry_max_ms = 200\n\
         reclaim_lead_s = {LEAD}\n\n\
         [plugins]\nenabled = [\"physical:host\", \"virtual:instance\"]\n\
         [plugins.drivers.\"virtual:instance\"]\ndriver = \"webhook\"\nurl = \"{base}/hook\"\ntimeout_ms = 5000\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn start() -> (Server, std::sync::Arc<Receiver>, tempfile::TempDir) {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    (s, rx, dir)
}

fn at(s: i64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::seconds(s)
}

fn date(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

async fn enrol(s: &Server, name: &str) -> String {
    let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

/// A lease of one whole host from `start` to `end`; its id and host.
async fn owner(s: &Server, name: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> (String, String) {
    let body = json!({"name": name, "start_date": date(start), "end_date": date(end),
                      "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    let host = l["lease"]["reservations"][0]["allocations"][0]["resource_id"].as_str().unwrap().to_string();
    (l["lease"]["id"].as_str().unwrap().to_string(), host)
}

/// Nova's claim for a server of `vcpus` on `host`, of type `kind`.
async fn claim(s: &Server, consumer: Uuid, host: &str, vcpus: i64, kind: &str) -> (StatusCode, Value) {
    let body = json!({"allocations": {host: {"resources": {"VCPU": vcpus, "MEMORY_MB": 512}}},
                      "project_id": "p2", "user_id": "bob", "consumer_generation": null, "consumer_type": kind});
    s.placement(Method::PUT, &format!("/allocations/{consumer}"), ADMIN, "1.38", body).await
}

async fn status(s: &Server, id: &str) -> String {
    let (st, l) = s.get(&format!("/v1/leases/{id}"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{l}");
    l["lease"]["status"].as_str().unwrap().to_string()
}

/// Waits for the receiver's first call deleting `consumer`; when it came.
async fn reclaimed(rx: &Receiver, consumer: Uuid, within: Duration) -> DateTime<Utc> {
    let deadline = Instant::now() + within;
    loop {
        let calls = rx.calls_of("delete");
        if let Some(c) = calls.iter().find(|c| c.payload["instance_id"] == json!(consumer.to_string())) {
            return c.received;
        }
        assert!(Instant::now() < deadline, "{consumer} was never reclaimed: {:?}", rx.calls());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The distinct reclaims of `consumer` the receiver applied (one per key).
fn reclaims_of(rx: &Receiver, consumer: Uuid) -> usize {
    let keys: std::collections::BTreeSet<String> = rx
        .calls_of("delete")
        .iter()
        .filter(|c| c.payload["instance_id"] == json!(consumer.to_string()))
        .map(|c| c.key.clone())
        .collect();
    keys.len()
}

#[tokio::test]
async fn a_preemptible_server_on_a_host_reserved_from_later_is_reclaimed_before_the_start_once() {
    let (s, rx, _dir) = start().await;
    enrol(&s, "only").await;
    let start = at(6);
    let (lease, host) = owner(&s, "tomorrow", start, at(60)).await;

    // The host is idle until the lease starts: a preemptible server may
    // borrow it; an ordinary one may not (it would hold past the start).
    let server = Uuid::new_v4();
    let (st, body) = claim(&s, Uuid::new_v4(), &host, 2, "INSTANCE").await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    let (st, body) = claim(&s, server, &host, 2, "PREEMPTIBLE").await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    let (_, shown) = s.placement(Method::GET, &format!("/allocations/{server}"), ADMIN, "1.38", json!(null)).await;
    assert_eq!(shown["allocations"][&host]["resources"]["VCPU"], 2, "{shown}");
    assert_eq!(shown["consumer_type"], "PREEMPTIBLE", "{shown}");
    let (_, usages) =
        s.placement(Method::GET, &format!("/resource_providers/{host}/usages"), ADMIN, "1.38", json!(null)).await;
    assert_eq!(usages["usages"]["VCPU"], 2, "{usages}");
    // The operator sees the loan and when it is reclaimed; a member does not.
    let (st, loans) = s.get("/v1/loans", ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{loans}");
    let loan = &loans["loans"][0];
    assert_eq!(
        (loan["consumer_id"].as_str(), loan["reclaim"].as_str()),
        (Some(server.to_string().as_str()), Some("PENDING"))
    );
    assert_eq!(loan["allocations"][0]["resources"]["VCPU"], 2, "{loans}");
    let until: DateTime<Utc> = format!("{}Z", loan["reclaim_at"].as_str().unwrap()).parse().unwrap();
    let off = until - (start - chrono::Duration::seconds(LEAD));
    assert!(off.num_microseconds().unwrap().abs() <= 1, "{loans}");
    assert_eq!(s.get("/v1/loans", ALICE).await.0, StatusCode::FORBIDDEN);

    // Written as an ordinary server, it is refused: a loan stays a loan.
    let body = json!({"allocations": {&host: {"resources": {"VCPU": 2, "MEMORY_MB": 512}}},
                      "project_id": "p2", "user_id": "bob", "consumer_generation": 1, "consumer_type": "INSTANCE"});
    let (st, body) = s.placement(Method::PUT, &format!("/allocations/{server}"), ADMIN, "1.38", body).await;
    assert_eq!((st, body["errors"][0]["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lend.consumer_kind")));

    // Reclaimed through the receiver before the owner's start, never after.
    let when = reclaimed(&rx, server, Duration::from_secs(15)).await;
    assert!(when < start, "reclaimed at {when}, the lease starts at {start}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while status(&s, &lease).await != "ACTIVE" {
        assert!(Instant::now() < deadline, "the owner's lease never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(reclaims_of(&rx, server), 1, "{:?}", rx.calls());
    let (_, loans) = s.get("/v1/loans", ADMIN).await;
    assert_eq!(loans["loans"][0]["reclaim"], "DONE", "{loans}");

    // What it borrowed is gone from Placement's view; within the lead of
    // the owner's need, nothing is lent.
    let (_, shown) = s.placement(Method::GET, &format!("/allocations/{server}"), ADMIN, "1.38", json!(null)).await;
    assert_eq!(shown["allocations"], json!({}), "{shown}");
    let (st, body) = claim(&s, Uuid::new_v4(), &host, 1, "PREEMPTIBLE").await;
    assert_eq!((st, body["errors"][0]["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lend.no_idle_capacity")));
    // Nova deletes the server's allocations; the loan is given back.
    let (st, _) = s.placement(Method::DELETE, &format!("/allocations/{server}"), ADMIN, "1.38", json!(null)).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let metrics = s.metrics().await;
    assert!(metrics.contains("berth_reclaims_total{outcome=\"done\"} 1"), "{metrics}");
    s.assert_no_panic();
    s.replay_verify();
}

#[tokio::test]
async fn a_lease_booked_over_a_loan_cuts_it_short_and_starts_on_time() {
    let (s, rx, _dir) = start().await;
    let host = enrol(&s, "only").await;
    // A free host: lent open-ended.
    let server = Uuid::new_v4();
    let (st, body) = claim(&s, server, &host, 8, "PREEMPTIBLE").await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    // The loan is not in an owner's way: the lease is booked, and the
    // loan ends the lead before it starts.
    let start = at(5);
    let (lease, booked) = owner(&s, "owner", start, at(60)).await;
    assert_eq!(booked, host);

    let when = reclaimed(&rx, server, Duration::from_secs(15)).await;
    assert!(when < start, "reclaimed at {when}, the lease starts at {start}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while status(&s, &lease).await != "ACTIVE" {
        assert!(Instant::now() < deadline, "the owner's lease never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A lease that needs the host now cuts a new loan now.
    let second = Uuid::new_v4();
    let other = enrol(&s, "other").await;
    let (st, body) = claim(&s, second, &other, 4, "PREEMPTIBLE").await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    let (_, took) = owner(&s, "now", Utc::now(), at(60)).await;
    assert_eq!(took, other);
    reclaimed(&rx, second, Duration::from_secs(10)).await;
    // Bad requests: a loan in a batch, a loan drawing from a reservation.
    let batch = json!({Uuid::new_v4().to_string(): {"allocations": {&other: {"resources": {"VCPU": 1}}},
                       "project_id": "p2", "user_id": "bob", "consumer_generation": null, "consumer_type": "PREEMPTIBLE"},
                       Uuid::new_v4().to_string(): {"allocations": {&other: {"resources": {"VCPU": 1}}},
                       "project_id": "p2", "user_id": "bob", "consumer_generation": null, "consumer_type": "PREEMPTIBLE"}});
    let (st, body) = s.placement(Method::POST, "/allocations", ADMIN, "1.38", batch).await;
    assert_eq!((st, body["errors"][0]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("berth.lend.invalid")));
    s.assert_no_panic();
    s.replay_verify();
}

/// Every instant from now on of every host, loans counted as the docs say:
/// `other holds + max(lendable holds, loans) <= capacity`, lendable holds
/// being what reservations with `lend_idle` hold and do not use. Checked
/// at each instant a hold starts or ends.
async fn within_capacity(s: &Server) {
    let c = berth_store::testing::connection(&s.db.store(1)).await;
    let over = c
        .query(
            "WITH h AS (SELECT a.provider_uuid, a.resource_class, a.used, a.during,
                               CASE WHEN lower(r.params->>'lend_idle') = 'true' THEN 'L' ELSE 'O' END AS kind
                        FROM allocations a LEFT JOIN reservation_slots rs ON rs.consumer_uuid = a.consumer_uuid
                        LEFT JOIN reservations r ON r.id = rs.reservation_id
                        UNION ALL SELECT provider_uuid, resource_class, used, during, 'X' FROM loan_allocations),
                  t AS (SELECT DISTINCT provider_uuid, resource_class, greatest(lower(during), now()) AS at FROM h
                        WHERE upper_inf(during) OR upper(during) > now()),
                  u AS (SELECT t.provider_uuid, t.resource_class, t.at,
                               coalesce(sum(h.used) FILTER (WHERE kind = 'O'), 0)
                               + greatest(coalesce(sum(h.used) FILTER (WHERE kind = 'L'), 0),
                                          coalesce(sum(h.used) FILTER (WHERE kind = 'X'), 0)) AS used
                        FROM t JOIN h ON h.provider_uuid = t.provider_uuid AND h.resource_class = t.resource_class
                                     AND h.during @> t.at
                        GROUP BY 1, 2, 3)
             SELECT u.provider_uuid::text, u.resource_class, u.at::text, u.used::int8,
                    ((i.total - i.reserved) * i.allocation_ratio)::int8 AS capacity
             FROM u JOIN inventories i ON i.provider_uuid = u.provider_uuid AND i.resource_class = u.resource_class
             WHERE u.used > ((i.total - i.reserved) * i.allocation_ratio)::int8",
            &[],
        )
        .await
        .unwrap();
    let over: Vec<String> = over
        .iter()
        .map(|r| {
            let (p, c, t): (String, String, String) = (r.get(0), r.get(1), r.get(2));
            format!("{p} {c} at {t}: {} of {}", r.get::<_, i64>(3), r.get::<_, i64>(4))
        })
        .collect();
    assert!(over.is_empty(), "over capacity: {over:?}");
}

/// Owners booking hosts and preemptible and ordinary servers claiming them,
/// in a random order: no instant of any host over capacity, every owner's
/// lease starts, and every loan on a host an owner books later is
/// reclaimed at the receiver before that owner's start.
#[tokio::test]
async fn owners_and_preemptible_servers_mixed_at_random_never_delay_an_owner() {
    let (s, rx, _dir) = start().await;
    let hosts = [enrol(&s, "h0").await, enrol(&s, "h1").await, enrol(&s, "h2").await];
    let mut seed: u64 = Utc::now().timestamp_subsec_nanos().into();
    println!("seed {seed}");
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut owners: Vec<(String, String, DateTime<Utc>)> = Vec::new();
    let mut loans: Vec<(Uuid, String, DateTime<Utc>)> = Vec::new();
    for i in 0..16 {
        let host = &hosts[next(3) as usize];
        match next(3) {
            0 => {
                let start = at(4 + next(6) as i64);
                let body = json!({"name": format!("owner-{i}"), "start_date": date(start), "end_date": date(at(40)),
                                  "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
                let (st, l) = s.post("/v1/leases", ALICE, body).await;
                assert!(st == StatusCode::CREATED || st == StatusCode::CONFLICT, "{st} {l}");
                if st == StatusCode::CREATED {
                    let on = l["lease"]["reservations"][0]["allocations"][0]["resource_id"].as_str().unwrap();
                    owners.push((l["lease"]["id"].as_str().unwrap().to_string(), on.to_string(), start));
                }
            }
            1 => {
                let consumer = Uuid::new_v4();
                let lent_at = Utc::now();
                let (st, body) = claim(&s, consumer, host, 1 + next(8) as i64, "PREEMPTIBLE").await;
                assert!(st == StatusCode::NO_CONTENT || st == StatusCode::CONFLICT, "{st} {body}");
                if st == StatusCode::NO_CONTENT {
                    loans.push((consumer, host.clone(), lent_at));
                }
            }
            _ => {
                let (st, body) = claim(&s, Uuid::new_v4(), host, 1 + next(4) as i64, "INSTANCE").await;
                assert!(st == StatusCode::NO_CONTENT || st == StatusCode::CONFLICT, "{st} {body}");
            }
        }
        within_capacity(&s).await;
    }
    let last = owners.iter().map(|o| o.2).max().unwrap_or_else(Utc::now);
    while Utc::now() < last + chrono::Duration::seconds(2) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (id, _, _) in &owners {
        assert_eq!(status(&s, id).await, "ACTIVE", "owner {id} did not start");
    }
    for (consumer, host, lent_at) in &loans {
        let Some(first) = owners.iter().filter(|o| o.1 == *host && o.2 > *lent_at).map(|o| o.2).min() else {
            continue;
        };
        let deletes = rx.calls_of("delete");
        let call = deletes.iter().find(|c| c.payload["instance_id"] == json!(consumer.to_string()));
        let call = call.unwrap_or_else(|| panic!("loan {consumer} on {host} never reclaimed before {first}"));
        assert!(call.received < first, "loan {consumer} reclaimed at {}, its owner started at {first}", call.received);
        assert_eq!(reclaims_of(&rx, *consumer), 1);
    }
    within_capacity(&s).await;
    println!("{} owners, {} loans", owners.len(), loans.len());
    s.assert_no_panic();
    s.replay_verify();
}

/// An instance lease of two slots of 4 VCPU from now; its reservation id
/// and the host holding them.
async fn instances(s: &Server, name: &str, lend_idle: bool) -> (Uuid, String) {
    let r = json!({"resource_type": "virtual:instance", "amount": 2, "vcpus": 4, "memory_mb": 4096,
                   "affinity": true, "lend_idle": lend_idle});
    let body = json!({"name": name, "start_date": "now", "end_date": date(at(120)), "reservations": [r]});
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    let r = &l["lease"]["reservations"][0];
    (r["id"].as_str().unwrap().parse().unwrap(), r["allocations"][0]["resource_id"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn an_owner_who_lends_what_it_does_not_use_takes_it_back_at_once() {
    let (s, rx, _dir) = start().await;
    enrol(&s, "lender").await;
    let (reservation, host) = instances(&s, "lends", true).await;
    enrol(&s, "keeper").await;
    let (_, kept) = instances(&s, "keeps", false).await;
    assert_ne!(host, kept);
    // What a lease does not lend is not idle, however unused.
    let (st, body) = claim(&s, Uuid::new_v4(), &kept, 4, "PREEMPTIBLE").await;
    assert_eq!((st, body["errors"][0]["code"].as_str()), (StatusCode::CONFLICT, Some("berth.lend.no_idle_capacity")));
    // What it lends is: half the host, open-ended.
    let server = Uuid::new_v4();
    let (st, body) = claim(&s, server, &host, 4, "PREEMPTIBLE").await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    // The owner's first instance draws from one slot: the other is still idle.
    let class = berth_core::lease::reservation_class(reservation);
    let draw = |n: u32| {
        json!({"allocations": {&host: {"resources": {"VCPU": 4, "MEMORY_MB": 4096, &class: 1}}},
               "project_id": "p1", "user_id": "alice", "consumer_generation": null, "consumer_type": format!("INSTANCE{n}")})
    };
    let (st, body) =
        s.placement(Method::PUT, &format!("/allocations/{}", Uuid::new_v4()), ADMIN, "1.38", draw(1)).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(reclaims_of(&rx, server), 0, "reclaimed while idle capacity remained: {:?}", rx.calls());
    within_capacity(&s).await;
    // The second takes the rest: the loan is cut now and reclaimed.
    let (st, body) =
        s.placement(Method::PUT, &format!("/allocations/{}", Uuid::new_v4()), ADMIN, "1.38", draw(2)).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    within_capacity(&s).await;
    reclaimed(&rx, server, Duration::from_secs(10)).await;
    assert_eq!(reclaims_of(&rx, server), 1);
    s.assert_no_panic();
    s.replay_verify();
}
