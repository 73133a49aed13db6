//! Each host's free spans (`host_free_spans`, the index a new lease finds
//! its tightest hosts through) stay exactly what the allocations leave
//! free, whoever writes them and however many at once: leases made and
//! deleted on the same few hosts, Placement's claims, hosts enrolled and
//! removed.

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::{EventMeta, Window};
use berth_store::commands::{GenerationCheck, LeaseDates, NewHost, NewLease, NewReservation};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Duration, DurationRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use uuid::Uuid;

use crate::common::{consumer, free_spans_match_allocations, hold, meta};

const HOSTS: usize = 4;
const WRITERS: u64 = 6;
const ROUNDS: usize = 25;
/// Hosts enrolled at once: more than their commit locks one by one.
const BULK: usize = 70;

fn host(name: String) -> NewHost {
    NewHost { name, resources: Some((64, 4096, 100)), reservable: true, capabilities: BTreeMap::new() }
}

/// A lease of one host over `w`, named `name`.
fn lease(name: String, w: Window) -> NewLease {
    let demand = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    NewLease {
        name,
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(w.start), end: DateSpec::At(w.end.unwrap()), before_end: None },
        reservations: vec![NewReservation { resource_type: "physical:host".into(), params: json!({}), demand }],
    }
}

/// One writer's rounds: leases made at random windows (often refused: the
/// few hosts fill up), some deleted again, and claims of a few VCPUs over a
/// window, replaced and deleted, all on the same hosts as the others.
async fn write(store: Store, hosts: Vec<Uuid>, base: DateTime<Utc>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut made = Vec::new();
    for k in 0..ROUNDS {
        let start = base + Duration::hours(rng.gen_range(0..24 * 4));
        let w = Window { start, end: Some(start + Duration::hours(rng.gen_range(1..=8))) };
        match rng.gen_range(0..4) {
            0 | 1 => {
                if let Ok(leases) = store.create_lease(&EventMeta::default(), lease(format!("w{seed}-{k}"), w)).await {
                    made.push(leases[0].record.id);
                }
            }
            2 if !made.is_empty() => {
                let id = made.swap_remove(rng.gen_range(0..made.len()));
                store.delete_lease(&EventMeta::default(), id, None).await.unwrap();
            }
            _ => {
                let on = hosts[rng.gen_range(0..hosts.len())];
                let id = Uuid::new_v4();
                let claim = consumer(id, GenerationCheck::New, vec![hold(on, "VCPU", 1, w)]);
                if store.replace_allocations(&meta(), vec![claim]).await.is_ok() && rng.gen_bool(0.5) {
                    store.delete_allocations(&meta(), id).await.unwrap();
                }
            }
        }
    }
}

#[tokio::test]
async fn free_spans_follow_every_write_even_at_once() {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS as usize + 2).with_small_cloud(0);
    let hosts = store.enrol_hosts(&meta(), (0..HOSTS).map(|i| host(format!("h{i}"))).collect()).await.unwrap();
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let writers: Vec<_> =
        (0..WRITERS).map(|seed| tokio::spawn(write(store.clone(), hosts.clone(), base, seed))).collect();
    // Meanwhile a host joins, one that holds nothing (no lease may take
    // it) leaves, and more hosts join at once than are locked one by one.
    let bulk = (0..BULK).map(|i| NewHost { reservable: false, ..host(format!("bulk{i}")) }).collect();
    store.enrol_hosts(&meta(), bulk).await.unwrap();
    let spare = NewHost { reservable: false, ..host("spare".into()) };
    let spare = store.enrol_host(&meta(), spare).await.unwrap();
    let late = store.enrol_host(&meta(), host("late".into())).await.unwrap();
    store.remove_host(&meta(), spare).await.unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let spans = free_spans_match_allocations(&db.url).await;
    // Each host holding something has more than the one span of a host
    // holding nothing.
    assert!(spans > (HOSTS * 3 + BULK) as i64, "{spans} spans: the writers held little");
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let gone = client.query("SELECT 1 FROM host_free_spans WHERE provider_uuid = $1", &[&spare]).await.unwrap();
    assert!(gone.is_empty(), "a host removed keeps no spans");
    let kept = client.query("SELECT 1 FROM host_free_spans WHERE provider_uuid = $1", &[&late]).await.unwrap();
    assert!(!kept.is_empty(), "a host enrolled has its spans");
}
