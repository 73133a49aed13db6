//! A host failing under many leases is healed lease by lease on the hosts
//! near each window (`plan::plan_near`): every lease moves, each to the
//! tightest host, as a decision over every host would take it, and no host
//! ends up holding two leases at once (each move sees the ones before it).

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use chrono::{DateTime, Duration, DurationRound, Utc};
use serde_json::json;
use uuid::Uuid;

use super::heal::Demands;
use crate::commands::{LeaseDates, NewHost, NewLease, NewReservation};
use crate::queries::leases::Lease;
use crate::testing::TestDatabase;
use crate::Store;

const LEASES: i64 = 12;

#[tokio::test]
async fn a_host_under_many_leases_heals_each_to_the_tightest_host_once() {
    let db = TestDatabase::new().await;
    heals_each_once(&db, &db.store(4).with_small_cloud(0)).await;
}

/// The same on a small cloud, every host read per lease.
#[tokio::test]
async fn on_a_small_cloud_too() {
    let db = TestDatabase::new().await;
    heals_each_once(&db, &db.store(4)).await;
}

/// Six hosts, h0 to h5, and [`LEASES`] one-host leases on h0, ten hours
/// apart from a day on: the hosts, the leases, and the k-th lease's start.
async fn hosts_and_leases_on_h0(store: &Store) -> (Vec<Uuid>, Vec<Lease>, impl Fn(i64) -> DateTime<Utc>) {
    let meta = EventMeta::default();
    let mut hosts = Vec::new();
    for i in 0..6 {
        let new = NewHost {
            name: format!("h{i}"),
            resources: Some((8, 4096, 10)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        hosts.push(store.enrol_host(&meta, new).await.unwrap());
    }
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let at = move |k: i64| base + Duration::hours(10 * k);
    let mut on_h0 = Vec::new();
    for k in 0..LEASES {
        on_h0.push(create(store, &format!("l{k}"), at(k), at(k) + Duration::hours(2), Some("h0")).await);
    }
    (hosts, on_h0, at)
}

async fn heals_each_once(db: &TestDatabase, store: &Store) {
    let meta = EventMeta::default();
    let (hosts, on_h0, at) = hosts_and_leases_on_h0(store).await;
    // h3 ends a lease as the fifth begins, h4 starts one as the eighth ends:
    // each the tightest host for that one.
    create(store, "before", at(4) - Duration::hours(3), at(4), Some("h3")).await;
    create(store, "after", at(7) + Duration::hours(2), at(7) + Duration::hours(5), Some("h4")).await;
    let any = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    let demands: Demands = on_h0.iter().map(|l| (l.record.reservations[0].id, any.clone())).collect();
    let healed = store.set_host_disabled(&meta, hosts[0], true, None, &demands).await.unwrap();
    assert_eq!(healed.iter().map(|h| h.moved).sum::<usize>(), LEASES as usize, "{healed:?}");
    assert_eq!(now_on(store, &on_h0[4]).await, hosts[3], "the host whose lease ends as it begins");
    assert_eq!(now_on(store, &on_h0[7]).await, hosts[4], "the host whose lease starts as it ends");
    for l in &on_h0 {
        assert_ne!(now_on(store, l).await, hosts[0]);
    }
    assert_eq!(doubly_booked(db, hosts[0]).await, 0, "a host holding two leases at once");
}

/// On a cloud past small the heal locks each replacement host as it
/// chooses it, not every candidate up front: a host another command holds
/// (here a transaction left open on h3's provider row, the tightest host
/// for the fifth lease) is passed over, not waited for, and every lease
/// still moves, none onto the held host, none twice onto one host.
#[tokio::test]
async fn a_heal_passes_over_a_host_another_command_holds() {
    let db = TestDatabase::new().await;
    let store = db.store(4).with_small_cloud(0);
    let meta = EventMeta::default();
    let (hosts, on_h0, at) = hosts_and_leases_on_h0(&store).await;
    create(&store, "before", at(4) - Duration::hours(3), at(4), Some("h3")).await;
    let mut holder = crate::testing::connection(&store).await;
    let holding = holder.transaction().await.unwrap();
    crate::lock::providers(&holding, &[hosts[3]]).await.unwrap();
    let any = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    let demands: Demands = on_h0.iter().map(|l| (l.record.reservations[0].id, any.clone())).collect();
    // A heal that waited for h3 would wait for as long as the holder stays.
    let heal = store.set_host_disabled(&meta, hosts[0], true, None, &demands);
    let healed = tokio::time::timeout(std::time::Duration::from_secs(120), heal)
        .await
        .expect("the heal waited for a host another command held")
        .unwrap();
    holding.rollback().await.unwrap();
    assert_eq!(healed.iter().map(|h| h.moved).sum::<usize>(), LEASES as usize, "{healed:?}");
    for l in &on_h0 {
        let on = now_on(&store, l).await;
        assert!(on != hosts[0] && on != hosts[3], "{} is on {on}", l.record.name);
    }
    assert_eq!(doubly_booked(&db, hosts[0]).await, 0, "a host holding two leases at once");
}

/// Pairs of holds at once on one host's VCPU, apart from `skip`'s.
async fn doubly_booked(db: &TestDatabase, skip: Uuid) -> i64 {
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.query_one(
        "SELECT count(*) AS twice FROM allocations a JOIN allocations b
         ON a.provider_uuid = b.provider_uuid AND a.resource_class = b.resource_class
            AND a.consumer_uuid < b.consumer_uuid AND a.during && b.during
         WHERE a.resource_class = 'VCPU' AND a.provider_uuid <> $1",
        &[&skip],
    )
    .await
    .unwrap()
    .get("twice")
}

/// The host `l`'s slot is on now.
async fn now_on(store: &Store, l: &Lease) -> Uuid {
    store.lease(l.record.id, None).await.unwrap().record.reservations[0].slots[0].provider
}

/// A one-host lease of "p1" from `start` to `end`, on the host named `on`.
async fn create(store: &Store, name: &str, start: DateTime<Utc>, end: DateTime<Utc>, on: Option<&str>) -> Lease {
    let hypervisor_properties = on.map(|n| berth_core::query::parse("q", &json!(["==", "$name", n])).unwrap().unwrap());
    let demand = Demand::Hosts { min: 1, max: 1, hypervisor_properties, resource_properties: None };
    let new = NewLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(start), end: DateSpec::At(end), before_end: None },
        reservations: vec![NewReservation { resource_type: "physical:host".into(), params: json!({}), demand }],
    };
    store.create_lease(&EventMeta::default(), new).await.unwrap().remove(0)
}
