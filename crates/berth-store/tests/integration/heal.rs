//! Healing keeps invariants 1 to 4: the capacity test's random workload,
//! with leases on hosts and instance slots, gains host failures and
//! recoveries (disable, enable, the retry) and maintenance windows
//! (scheduled, with and without heal, and cancelled), run by concurrent
//! writers;
//! between rounds every instant of every provider's timeline is within
//! capacity (1), every instant of the project's usage within its limit (2),
//! every slot holds what it says where it says and in one place at a time
//! (3: moves are whole), no
//! slot of a lease still running sits on an unusable host unless its
//! reservation is marked, no slot holds a host over its maintenance window
//! unless its reservation is marked, and replay gives the projections (4).

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use berth_core::dates::DateSpec;
use berth_core::error::ErrorKind;
use berth_core::lease::Demand;
use berth_core::quota::Scope;
use berth_core::{timeline, EventMeta, Window};
use berth_store::commands::{Demands, LeaseDates, LeaseUpdate, NewHost, NewLease, NewMaintenance, NewReservation};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Duration, Utc};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use uuid::Uuid;

const WRITERS: usize = 8;
/// Rounds always run; the workload is random and its interleaving is the
/// scheduler's, so a run that has not yet moved slots on a heal, left one
/// waiting, and scheduled and cancelled maintenance goes on, up to
/// `MAX_ROUNDS` (invariants checked after each), before it fails.
const ROUNDS: usize = 4;
const MAX_ROUNDS: usize = 16;
const STEPS: usize = 8;
const HOSTS: usize = 6;
const VCPUS: i64 = 8;
const PROJECT_VCPU_LIMIT: i64 = 24;

fn meta() -> EventMeta {
    EventMeta::default()
}

fn demand_of(resource_type: &str, params: &Value) -> Demand {
    let n = |k: &str| params[k].as_u64().unwrap() as u32;
    if resource_type == "physical:host" {
        Demand::Hosts { min: n("min"), max: n("max"), hypervisor_properties: None, resource_properties: None }
    } else {
        Demand::Slots {
            amount: n("amount"),
            resources: BTreeMap::from([("VCPU".to_string(), params["vcpus"].as_i64().unwrap())]),
            affinity: None,
            resource_properties: None,
            traits: Default::default(),
        }
    }
}

fn reservation(rng: &mut impl Rng) -> NewReservation {
    let (resource_type, params) = if rng.gen_bool(0.5) {
        let n = rng.gen_range(1..=2);
        ("physical:host", json!({"min": n, "max": n}))
    } else {
        ("virtual:instance", json!({"amount": rng.gen_range(1..=3), "vcpus": 2}))
    };
    let mut params = params;
    if rng.gen_bool(0.15) {
        params["heal"] = json!(false);
    }
    NewReservation { resource_type: resource_type.into(), demand: demand_of(resource_type, &params), params }
}

/// What every reservation to heal needs, as its plugin would say.
async fn demands(store: &Store, down: &[Uuid]) -> Demands {
    let list = store.reservations_to_heal(down).await.unwrap();
    list.into_iter().map(|r| (r.reservation, demand_of(&r.resource_type, &r.params))).collect()
}

/// Schedules maintenance of `host` over a random window, with heal or
/// without, after asking (as the API does) what the leases hit need.
async fn maintain(store: &Store, host: Uuid, rng: &mut impl Rng, t0: DateTime<Utc>) -> Result<(), berth_core::Error> {
    let start = t0 + Duration::minutes(rng.gen_range(0..300));
    let end = start + Duration::minutes(rng.gen_range(30..200));
    let new = NewMaintenance { hosts: vec![host], start, end, heal: rng.gen_bool(0.6), reason: None };
    let hit = store.reservations_hit(&new).await?;
    let d: Demands = hit.into_iter().map(|r| (r.reservation, demand_of(&r.resource_type, &r.params))).collect();
    store.schedule_maintenance(&meta(), &new, &d).await.map(|_| ())
}

/// Cancels one of the maintenance windows not over, if any.
async fn cancel_maintenance(store: &Store, rng: &mut impl Rng) -> Result<(), berth_core::Error> {
    let windows = store.maintenance_windows().await?;
    if windows.is_empty() {
        return Ok(());
    }
    let id = windows[rng.gen_range(0..windows.len())].id;
    match store.cancel_maintenance(&meta(), id).await {
        // Another writer cancelled it first.
        Err(e) if matches!(e.kind, ErrorKind::NotFound) => Ok(()),
        other => other,
    }
}

/// One writer's step: create, update or delete a lease, fail or recover a
/// host, schedule or cancel maintenance, or heal what waits.
async fn step(store: &Store, hosts: &[Uuid], mine: &mut Vec<Uuid>, rng: &mut impl Rng, t0: DateTime<Utc>) {
    let host = hosts[rng.gen_range(0..hosts.len())];
    let outcome = match rng.gen_range(0..13) {
        0..=4 => {
            let start = if rng.gen_bool(0.4) {
                DateSpec::Now
            } else {
                DateSpec::At(t0 + Duration::minutes(rng.gen_range(1..240)))
            };
            let end = t0 + Duration::minutes(rng.gen_range(250..600));
            let project = if rng.gen_bool(0.5) { "p1" } else { "p2" };
            let new = NewLease {
                name: Uuid::new_v4().to_string(),
                project_id: project.into(),
                user_id: "u".into(),
                dates: LeaseDates::One { start, end: DateSpec::At(end), before_end: None },
                reservations: vec![reservation(rng)],
            };
            store.create_lease(&meta(), new).await.map(|made| mine.extend(made.iter().map(|l| l.record.id)))
        }
        5 if !mine.is_empty() => {
            let id = mine.swap_remove(rng.gen_range(0..mine.len()));
            store.delete_lease(&meta(), id, None).await
        }
        5 | 6 => {
            let d = demands(store, &[host]).await;
            store.set_host_disabled(&meta(), host, true, Some("admin".into()), &d).await.map(|_| ())
        }
        7 | 8 => {
            let d = demands(store, &[]).await;
            store.set_host_disabled(&meta(), host, false, None, &d).await.map(|_| ())
        }
        9 => {
            let d = demands(store, &[]).await;
            store.heal(&meta(), &d).await.map(|_| ())
        }
        10 => maintain(store, host, rng, t0).await,
        11 => cancel_maintenance(store, rng).await,
        // An update writes the slots again: what they held before stays.
        _ if !mine.is_empty() => {
            let id = mine[rng.gen_range(0..mine.len())];
            let end = DateSpec::At(t0 + Duration::minutes(rng.gen_range(250..600)));
            store.update_lease(&meta(), id, None, LeaseUpdate { end: Some(end), ..LeaseUpdate::default() }).await
        }
        _ => Ok(()),
    };
    match outcome {
        Ok(()) => {}
        Err(e) if matches!(e.kind, ErrorKind::Capacity | ErrorKind::Quota) => {}
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_failures_and_recoveries_keep_invariants_one_to_four() {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS + 2);
    let mut hosts = Vec::new();
    for i in 0..HOSTS {
        let new = NewHost {
            name: format!("h{i}"),
            resources: Some((VCPUS, 4096, 0)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        hosts.push(store.enrol_host(&meta(), new).await.unwrap());
    }
    // Invariant 2 bears on changes made after the limit was set.
    let scope = Scope { project_id: Some("p1".into()), user_id: None };
    store.set_quota(&meta(), scope, BTreeMap::from([("VCPU".into(), PROJECT_VCPU_LIMIT)])).await.unwrap();
    let hosts = Arc::new(hosts);
    let t0 = store.now().await.unwrap();
    let mut mine: Vec<Vec<Uuid>> = vec![Vec::new(); WRITERS];
    let mut round = 0;
    while round < ROUNDS || (round < MAX_ROUNDS && !exercised(&db.url).await.enough()) {
        let mut tasks = Vec::new();
        for (w, leases) in mine.drain(..).enumerate() {
            let (store, hosts) = (store.clone(), hosts.clone());
            tasks.push(tokio::spawn(async move {
                let mut leases = leases;
                let mut rng = rand::rngs::StdRng::seed_from_u64((round * WRITERS + w) as u64);
                for _ in 0..STEPS {
                    step(&store, &hosts, &mut leases, &mut rng, t0).await;
                }
                leases
            }));
        }
        for t in tasks {
            mine.push(t.await.unwrap());
        }
        check(&db.url, &store, &hosts).await;
        round += 1;
    }
    // Everything back (maintenance cancelled, hosts enabled): what waited heals.
    for w in store.maintenance_windows().await.unwrap() {
        store.cancel_maintenance(&meta(), w.id).await.unwrap();
    }
    for h in hosts.iter() {
        let d = demands(&store, &[]).await;
        store.set_host_disabled(&meta(), *h, false, None, &d).await.unwrap();
    }
    check(&db.url, &store, &hosts).await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let missing: i64 = client
        .query_one(
            "SELECT count(*) FROM reservations r JOIN leases l ON l.id = r.lease_id
             WHERE r.missing_resources AND l.end_at > now()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(missing, 0, "with every host back, nothing is missing");
    // The run healed, and left some waiting on the way.
    let seen = exercised(&db.url).await;
    println!("{round} rounds: {seen:?}");
    assert!(seen.enough(), "after {round} rounds the workload did too little: {seen:?}");
}

/// What the random workload has done so far, from the log.
#[derive(Debug)]
struct Exercised {
    heals_that_moved: i64,
    unhealed: i64,
    maintenance_scheduled: i64,
    maintenance_cancelled: i64,
}

impl Exercised {
    fn enough(&self) -> bool {
        self.heals_that_moved > 5
            && self.unhealed > 0
            && self.maintenance_scheduled > 2
            && self.maintenance_cancelled > 0
    }
}

async fn exercised(url: &str) -> Exercised {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE type = 'ReservationHealed' AND jsonb_array_length(data->'moves') > 0),
                    count(*) FILTER (WHERE type = 'ReservationUnhealed'),
                    count(*) FILTER (WHERE type = 'MaintenanceScheduled'),
                    count(*) FILTER (WHERE type = 'MaintenanceCancelled')
             FROM log_events",
            &[],
        )
        .await
        .unwrap();
    Exercised {
        heals_that_moved: row.get(0),
        unhealed: row.get(1),
        maintenance_scheduled: row.get(2),
        maintenance_cancelled: row.get(3),
    }
}

/// Invariants 1 to 4, and healing's own: no slot of a running lease on an
/// unusable host unless its reservation is marked.
async fn check(url: &str, store: &Store, hosts: &[Uuid]) {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let everything = Window::from(Utc::now() - Duration::days(1));
    // 1: every instant of every provider's VCPU timeline.
    for h in hosts {
        let rows = store.provider_allocations(*h, None).await.unwrap();
        let holds: Vec<(Window, i64)> =
            rows.iter().filter(|r| r.resource_class == "VCPU").map(|r| (r.window, r.used)).collect();
        for (w, _) in &holds {
            let at: i64 = holds.iter().filter(|(o, _)| o.contains(w.start)).map(|(_, u)| u).sum();
            assert!(at <= VCPUS, "host {h}: {at} VCPU at {}", w.start);
        }
        assert!(timeline::peak(&holds, &everything) <= VCPUS);
    }
    // 2: every instant of p1's VCPU usage.
    let rows = c
        .query("SELECT lower(during), upper(during), used FROM allocations WHERE project_id = 'p1' AND resource_class = 'VCPU'", &[])
        .await
        .unwrap();
    let usage: Vec<(Window, i64)> =
        rows.iter().map(|r| (Window { start: r.get(0), end: r.get(1) }, r.get(2))).collect();
    assert!(timeline::peak(&usage, &everything) <= PROJECT_VCPU_LIMIT, "p1 over its limit: {usage:?}");
    one_place_at_a_time(&c).await;
    // 3: each slot of a lease not ended holds its resources on its provider
    // from now (or its start) to its end, and nothing more from then on.
    let slots = c
        .query(
            "SELECT s.consumer_uuid, s.provider_uuid, s.resources, greatest(l.start_at, now()), l.end_at,
                    r.missing_resources, coalesce(h.disabled, false) OR EXISTS (SELECT 1 FROM provider_traits t
                        WHERE t.provider_uuid = s.provider_uuid AND t.trait = 'COMPUTE_STATUS_DISABLED')
             FROM reservation_slots s JOIN reservations r ON r.id = s.reservation_id
             JOIN leases l ON l.id = r.lease_id LEFT JOIN hosts h ON h.provider_uuid = s.provider_uuid
             WHERE l.end_at > now() + interval '1 second'",
            &[],
        )
        .await
        .unwrap();
    for s in &slots {
        let (consumer, provider): (Uuid, Uuid) = (s.get(0), s.get(1));
        let resources: HashMap<String, i64> = serde_json::from_value(s.get(2)).unwrap();
        let (from, end): (DateTime<Utc>, DateTime<Utc>) = (s.get(3), s.get(4));
        let held = c
            .query(
                "SELECT provider_uuid, resource_class, used FROM allocations
                 WHERE consumer_uuid = $1 AND during @> $2::timestamptz",
                &[&consumer, &from],
            )
            .await
            .unwrap();
        let mut seen: HashMap<String, i64> = HashMap::new();
        for a in &held {
            assert_eq!(a.get::<_, Uuid>(0), provider, "slot {consumer} holds on another provider");
            *seen.entry(a.get(1)).or_default() += a.get::<_, i64>(2);
        }
        let wanted: HashMap<String, i64> = resources.into_iter().filter(|(_, v)| *v > 0).collect();
        assert_eq!(seen, wanted, "slot {consumer} at {from} (to {end})");
        let (missing, unusable): (bool, bool) = (s.get(5), s.get(6));
        assert!(!unusable || missing, "slot {consumer} on an unusable host, unmarked");
    }
    // Maintenance: no slot of a lease not ended holds a host over one of
    // its windows (from now on) unless its reservation is marked.
    let held_in_maintenance: i64 = c
        .query_one(
            "SELECT count(*) FROM reservation_slots s JOIN reservations r ON r.id = s.reservation_id
             JOIN leases l ON l.id = r.lease_id
             JOIN maintenance_windows m ON m.provider_uuid = s.provider_uuid
                 AND m.during && tstzrange(greatest(l.start_at, now() + interval '1 second'), l.end_at)
             WHERE l.end_at > now() + interval '1 second' AND NOT r.missing_resources",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held_in_maintenance, 0, "slots on hosts under maintenance, unmarked");
    // 4.
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// A slot is in one place at a time: a move cuts its old hold where its new
/// one begins, never after (the past included: it counts in usage).
async fn one_place_at_a_time(c: &tokio_postgres::Client) {
    let twice = c
        .query(
            "SELECT a.consumer_uuid, a.provider_uuid, a.during::text, b.provider_uuid, b.during::text
             FROM allocations a JOIN allocations b ON b.consumer_uuid = a.consumer_uuid
                 AND b.resource_class = a.resource_class AND a.ctid < b.ctid AND a.during && b.during
             WHERE a.consumer_uuid IN (SELECT consumer_uuid FROM reservation_slots)",
            &[],
        )
        .await
        .unwrap();
    let twice: Vec<(Uuid, Uuid, String, Uuid, String)> =
        twice.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect();
    assert!(twice.is_empty(), "slots holding twice at once: {twice:?}");
}
