//! A heal decides at the instant it reads once its locks are held, not at
//! the one its command read before it waited on them: another heal that
//! moved the same slot meanwhile cut it later, and cutting before that cut
//! would leave the slot holding in two places at once (counted twice in its
//! project's usage). CI saw it once as a project over its limit in the past.

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::{Demand, LeaseRecord};
use berth_core::{Event, EventMeta};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::heal::{heal_locked, Changed, Demands, Placing};
use super::LeaseUpdate;
use crate::commands::{LeaseDates, NewHost, NewLease, NewReservation};
use crate::testing::TestDatabase;

#[tokio::test]
async fn a_heal_that_waited_cuts_no_earlier_than_the_move_before_it() {
    let (db, store, lease, demand) = leased().await;
    let meta = EventMeta::default();
    let reservation = &lease.reservations[0];
    let slot = reservation.slots[0].consumer;
    let demands: Demands = [(reservation.id, demand)].into();
    // The first move, as a command that did not wait.
    let first = store.set_host_disabled(&meta, reservation.slots[0].provider, true, None, &demands).await.unwrap();
    assert_eq!(first[0].moved, 1);
    let first_cut = holds(&db.url, slot).await.iter().map(|h| h.1).max().unwrap();
    // The second, by a command whose instant was read a second before the
    // first move committed (it waited on the lease's lock meanwhile).
    let (on, _, _) = holds(&db.url, slot).await.into_iter().find(|h| h.2.is_some_and(|e| e > first_cut)).unwrap();
    let seen_at = first_cut - Duration::seconds(1);
    let disabled = vec![Event::HostDisabled { provider: on, disabled: true, reason: None, at: seen_at }];
    let cleaning = store.cleaning_time();
    let second = crate::tx::command!(store, |tx| {
        heal_locked(
            tx,
            &meta,
            disabled.clone(),
            Changed { down: &[on], ..Default::default() },
            &demands,
            seen_at,
            Placing { cleaning, small: crate::commands::leases::small::SMALL },
        )
        .await
    })
    .unwrap();
    assert_eq!(second[0].moved, 1);
    let after = holds(&db.url, slot).await;
    let providers: Vec<Uuid> = after.iter().map(|h| h.0).collect();
    assert_eq!(providers.len(), 3, "a hold on each host in turn: {after:?}");
    assert_eq!(providers[1], on, "{after:?}");
    for pair in after.windows(2) {
        assert!(pair[0].2.is_some_and(|e| e <= pair[1].1), "the slot holds in two places at once: {after:?}");
    }
    assert!(after[2].1 >= first_cut, "the second move cut before the first: {after:?}");
}

/// An update writes a lease's slots again from its instant on; what they
/// held before stays where it was, a heal's move included (it was written
/// over the whole window on the slot's new host, a hold there before the
/// slot was, which that host's past and its project's usage then counted).
#[tokio::test]
async fn updating_a_healed_lease_keeps_where_its_slot_was() {
    let (db, store, lease, demand) = leased().await;
    let meta = EventMeta::default();
    let reservation = &lease.reservations[0];
    let (slot, was_on) = (reservation.slots[0].consumer, reservation.slots[0].provider);
    let demands: Demands = [(reservation.id, demand)].into();
    store.set_host_disabled(&meta, was_on, true, None, &demands).await.unwrap();
    let moved = holds(&db.url, slot).await;
    assert_eq!(moved.len(), 2, "{moved:?}");
    let end = lease.end - Duration::minutes(10);
    let update = LeaseUpdate { end: Some(DateSpec::At(end)), ..LeaseUpdate::default() };
    store.update_lease(&meta, lease.id, None, update).await.unwrap();
    let after = holds(&db.url, slot).await;
    assert_eq!(after.len(), 2, "before the move and after it: {after:?}");
    assert_eq!((after[0].0, after[0].1, after[0].2), (was_on, lease.start, moved[0].2), "{after:?}");
    assert_eq!((after[1].0, after[1].1, after[1].2), (moved[1].0, moved[1].1, Some(end)), "{after:?}");
    // Once more, with nothing moved since: still one hold after the move.
    let update = LeaseUpdate { end: Some(DateSpec::At(end - Duration::minutes(5))), ..LeaseUpdate::default() };
    store.update_lease(&meta, lease.id, None, update).await.unwrap();
    let again = holds(&db.url, slot).await;
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[1].2, Some(end - Duration::minutes(5)));
}

/// Three hosts of 8 VCPU and a lease from now of one slot of 2 on one of
/// them, with what its reservation needs.
async fn leased() -> (TestDatabase, crate::Store, LeaseRecord, Demand) {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let meta = EventMeta::default();
    let mut hosts = Vec::new();
    for i in 0..3 {
        let new = NewHost {
            name: format!("h{i}"),
            resources: Some((8, 4096, 0)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        hosts.push(store.enrol_host(&meta, new).await.unwrap());
    }
    let demand = Demand::Slots {
        amount: 1,
        resources: BTreeMap::from([("VCPU".to_string(), 2)]),
        affinity: None,
        resource_properties: None,
        traits: Default::default(),
    };
    let now = store.now().await.unwrap();
    let new = NewLease {
        name: "l".into(),
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::Now, end: DateSpec::At(now + Duration::hours(1)), before_end: None },
        reservations: vec![NewReservation {
            resource_type: "virtual:instance".into(),
            params: serde_json::json!({"amount": 1, "vcpus": 2}),
            demand: demand.clone(),
        }],
    };
    let lease = store.create_lease(&meta, new).await.unwrap().remove(0).record;
    (db, store, lease, demand)
}

/// The slot's holds of VCPU, by start: (provider, start, end).
async fn holds(url: &str, consumer: Uuid) -> Vec<(Uuid, DateTime<Utc>, Option<DateTime<Utc>>)> {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.query(
        "SELECT provider_uuid, lower(during) AS start_at, upper(during) AS end_at FROM allocations
         WHERE consumer_uuid = $1 AND resource_class = 'VCPU' ORDER BY lower(during)",
        &[&consumer],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get("provider_uuid"), r.get("start_at"), r.get("end_at")))
    .collect()
}
