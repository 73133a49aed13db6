//! Lease and host commands against a real PostgreSQL.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::lease::Demand;
use berth_core::query;
use berth_core::{EventMeta, Window};
use berth_store::commands::{LeaseDates, LeaseUpdate, NewHost, NewLease, NewReservation, ReservationUpdate};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Duration, DurationRound, Utc};
use serde_json::json;
use uuid::Uuid;

fn meta() -> EventMeta {
    EventMeta::default()
}

/// An hour boundary well in the future, so tests never race the clock.
fn t(h: i64) -> DateTime<Utc> {
    (Utc::now() + Duration::days(30)).duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(h)
}

async fn host(store: &Store, name: &str, vcpus: i64, caps: serde_json::Value) -> Uuid {
    let capabilities = serde_json::from_value(caps).unwrap();
    store
        .enrol_host(
            &meta(),
            NewHost { name: name.into(), resources: Some((vcpus, 4096, 100)), reservable: true, capabilities },
        )
        .await
        .unwrap()
}

fn hosts(min: u32, max: u32, resource_properties: serde_json::Value) -> NewReservation {
    NewReservation {
        resource_type: "physical:host".into(),
        params: json!({"min": min, "max": max, "resource_properties": resource_properties}),
        demand: Demand::Hosts {
            min,
            max,
            hypervisor_properties: None,
            resource_properties: query::parse("resource_properties", &resource_properties).unwrap(),
        },
    }
}

fn slots(amount: u32, vcpus: i64, affinity: Option<bool>) -> NewReservation {
    NewReservation {
        resource_type: "virtual:instance".into(),
        params: json!({"amount": amount, "vcpus": vcpus}),
        demand: Demand::Slots {
            amount,
            resources: BTreeMap::from([("VCPU".to_string(), vcpus)]),
            affinity,
            resource_properties: None,
            traits: Default::default(),
        },
    }
}

fn lease(name: &str, project: &str, start: i64, end: i64, reservations: Vec<NewReservation>) -> NewLease {
    NewLease {
        name: name.into(),
        project_id: project.into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(t(start)), end: DateSpec::At(t(end)), before_end: None },
        reservations,
    }
}

async fn assert_replay_clean(store: &Store) {
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test]
async fn the_only_matching_host_is_taken_once_per_instant() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let gpu = host(&store, "gpu-1", 8, json!({"gpu": "true"})).await;
    host(&store, "plain-1", 8, json!({})).await;
    let want = || vec![hosts(1, 1, json!(["=", "$gpu", "true"]))];
    let a = store.create_lease(&meta(), lease("a", "p", 1, 3, want())).await.unwrap()[0].record.id;
    let err = store.create_lease(&meta(), lease("b", "p", 2, 4, want())).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    assert_eq!(err.code, "berth.lease.reservation_0.no_capacity");
    // Back to back on either side fits.
    store.create_lease(&meta(), lease("c", "p", 3, 5, want())).await.unwrap();
    store.create_lease(&meta(), lease("d", "p", 0, 1, want())).await.unwrap();
    let a = store.lease(a, None).await.unwrap().record;
    assert_eq!(a.reservations[0].slots.len(), 1);
    assert_eq!(a.reservations[0].slots[0].provider, gpu);
    // The whole host is held over the window, nothing outside it.
    let usage = store.provider_usage_at(gpu, t(2)).await.unwrap();
    assert_eq!(usage.get("VCPU"), Some(&8));
    assert_eq!(usage.get("MEMORY_MB"), Some(&4096));
    assert!(store.provider_usage_at(gpu, t(6)).await.unwrap().is_empty());
    // The second reservation of a lease is named when it is the one that does not fit.
    let err = store
        .create_lease(&meta(), lease("e", "p", 6, 7, vec![hosts(1, 1, json!([])), hosts(2, 2, json!([]))]))
        .await
        .unwrap_err();
    assert_eq!(err.code, "berth.lease.reservation_1.no_capacity");
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn min_and_max_take_as_many_free_hosts_as_allowed() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    for i in 0..3 {
        host(&store, &format!("h{i}"), 4, json!({})).await;
    }
    store.create_lease(&meta(), lease("one", "p", 1, 3, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let many =
        store.create_lease(&meta(), lease("many", "p", 2, 4, vec![hosts(1, 5, json!([]))])).await.unwrap()[0].record.id;
    assert_eq!(store.lease(many, None).await.unwrap().record.reservations[0].slots.len(), 2);
    let err = store.create_lease(&meta(), lease("more", "p", 2, 4, vec![hosts(1, 1, json!([]))])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    // min above what exists never fits.
    let err = store.create_lease(&meta(), lease("big", "p", 10, 11, vec![hosts(4, 4, json!([]))])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn properties_compare_numbers_as_numbers() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let ten = host(&store, "ten", 4, json!({"gpus": "10"})).await;
    host(&store, "nine", 4, json!({"gpus": "9"})).await;
    // As strings, "9" > "10" and "10" would not be > "9".
    let id = store
        .create_lease(&meta(), lease("n", "p", 1, 2, vec![hosts(1, 2, json!([">", "$gpus", "9"]))]))
        .await
        .unwrap()[0]
        .record
        .id;
    let slots = &store.lease(id, None).await.unwrap().record.reservations[0].slots;
    assert_eq!(slots.len(), 1);
    assert_eq!(slots[0].provider, ten);
    // Hypervisor properties read the inventory.
    let r = NewReservation {
        demand: Demand::Hosts {
            min: 1,
            max: 1,
            hypervisor_properties: query::parse("h", &json!([">=", "$vcpus", 5])).unwrap(),
            resource_properties: None,
        },
        ..hosts(1, 1, json!([]))
    };
    let err = store.create_lease(&meta(), lease("v", "p", 3, 4, vec![r])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
}

#[tokio::test]
async fn extending_and_shortening_are_rechecked() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "only", 4, json!({})).await;
    let a =
        store.create_lease(&meta(), lease("a", "p", 1, 3, vec![hosts(1, 1, json!([]))])).await.unwrap()[0].record.id;
    let b =
        store.create_lease(&meta(), lease("b", "p", 5, 7, vec![hosts(1, 1, json!([]))])).await.unwrap()[0].record.id;
    let end = |h| LeaseUpdate { end: Some(DateSpec::At(t(h))), ..Default::default() };
    let err = store.update_lease(&meta(), a, None, end(6)).await.unwrap_err();
    assert_eq!(err.code, "berth.lease.reservation_0.no_capacity");
    store.update_lease(&meta(), a, None, end(5)).await.unwrap();
    let got = store.lease(a, None).await.unwrap().record;
    assert_eq!(got.end, t(5));
    assert_eq!(got.events.iter().map(|e| e.time).collect::<Vec<_>>(), vec![t(1), t(4), t(5)]);
    // Moving b earlier now collides with a; shortening a makes room.
    let start = |h| LeaseUpdate { start: Some(DateSpec::At(t(h))), ..Default::default() };
    assert_eq!(store.update_lease(&meta(), b, None, start(4)).await.unwrap_err().kind, ErrorKind::Capacity);
    store.update_lease(&meta(), a, None, end(2)).await.unwrap();
    store.update_lease(&meta(), b, None, start(2)).await.unwrap();
    // End before start, or in the past: 400, nothing changes.
    let err = store.update_lease(&meta(), b, None, end(1)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidDate);
    let past = LeaseUpdate { end: Some(DateSpec::At(Utc::now() - Duration::hours(1))), ..Default::default() };
    assert_eq!(store.update_lease(&meta(), b, None, past).await.unwrap_err().kind, ErrorKind::Invalid);
    assert_eq!(store.lease(b, None).await.unwrap().record.start, t(2));
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn reservations_resize_all_or_nothing() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    for i in 0..3 {
        host(&store, &format!("h{i}"), 4, json!({})).await;
    }
    let id =
        store.create_lease(&meta(), lease("a", "p", 1, 3, vec![hosts(1, 1, json!([]))])).await.unwrap()[0].record.id;
    let before = store.lease(id, None).await.unwrap().record;
    let rid = before.reservations[0].id;
    let grow = |n: u32| LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id: rid,
            params: json!({"min": n, "max": n}),
            demand: hosts(n, n, json!([])).demand,
        }],
        ..Default::default()
    };
    store.update_lease(&meta(), id, None, grow(3)).await.unwrap();
    let after = store.lease(id, None).await.unwrap().record;
    assert_eq!(after.reservations[0].slots.len(), 3);
    // The host it had stays with the same slot consumer.
    assert!(after.reservations[0].slots.contains(&before.reservations[0].slots[0]));
    assert_eq!(store.update_lease(&meta(), id, None, grow(4)).await.unwrap_err().kind, ErrorKind::Capacity);
    store.update_lease(&meta(), id, None, grow(1)).await.unwrap();
    let after = store.lease(id, None).await.unwrap().record;
    assert_eq!(after.reservations[0].slots, before.reservations[0].slots);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn instance_slots_share_hosts_over_time() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "a", 4, json!({})).await;
    host(&store, "b", 4, json!({})).await;
    let made = store.create_lease(&meta(), lease("one", "p", 1, 3, vec![slots(2, 2, Some(true))])).await.unwrap();
    let one = made[0].record.id;
    let read = store.lease(one, None).await.unwrap();
    // The lease made is answered as a read shows it, slots in order.
    assert_eq!(made[0], read);
    let r = &read.record.reservations[0];
    assert_eq!(r.slots.len(), 2);
    assert_eq!(r.slots[0].provider, r.slots[1].provider);
    // Two more apart, then nothing is left over 1..3.
    store.create_lease(&meta(), lease("two", "p", 1, 3, vec![slots(2, 2, Some(false))])).await.unwrap_err();
    store.create_lease(&meta(), lease("two", "p", 1, 3, vec![slots(2, 2, None)])).await.unwrap();
    let err = store.create_lease(&meta(), lease("three", "p", 2, 4, vec![slots(1, 1, None)])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    store.create_lease(&meta(), lease("three", "p", 3, 4, vec![slots(4, 2, None)])).await.unwrap();
    // Deleting frees at once.
    store.delete_lease(&meta(), one, None).await.unwrap();
    store.create_lease(&meta(), lease("four", "p", 2, 3, vec![slots(1, 4, None)])).await.unwrap();
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn projects_see_only_their_own_leases() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "h", 4, json!({})).await;
    let mine = store.create_lease(&meta(), lease("x", "p1", 1, 2, vec![])).await.unwrap()[0].record.id;
    store.create_lease(&meta(), lease("x", "p2", 1, 2, vec![])).await.unwrap();
    assert_eq!(store.lease(mine, Some("p2")).await.unwrap_err().code, ErrorCode::LeaseNotFound);
    assert!(store.lease(mine, Some("p1")).await.is_ok());
    assert!(store.lease(mine, None).await.is_ok());
    let rename = LeaseUpdate { name: Some("y".into()), ..Default::default() };
    assert_eq!(
        store.update_lease(&meta(), mine, Some("p2"), rename.clone()).await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    assert_eq!(store.delete_lease(&meta(), mine, Some("p2")).await.unwrap_err().kind, ErrorKind::NotFound);
    let filter = |p: Option<&str>| berth_store::queries::leases::LeaseFilter {
        project_id: p.map(str::to_string),
        ..Default::default()
    };
    assert_eq!(store.leases(&filter(Some("p2"))).await.unwrap().len(), 1);
    assert_eq!(store.leases(&filter(None)).await.unwrap().len(), 2);
    // Names are unique within a project.
    let err = store.create_lease(&meta(), lease("x", "p1", 3, 4, vec![])).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::DuplicateLeaseName);
    store.update_lease(&meta(), mine, Some("p1"), rename).await.unwrap();
    assert_eq!(store.lease(mine, None).await.unwrap().record.name, "y");
}

#[tokio::test]
async fn placement_allocations_count_against_leases() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let h = host(&store, "h", 4, json!({})).await;
    let claim = berth_store::commands::ConsumerAllocations {
        consumer: Uuid::new_v4(),
        project_id: "p".into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: berth_store::commands::GenerationCheck::New,
        allocations: vec![berth_core::event::Allocation {
            provider: h,
            resource_class: "VCPU".into(),
            used: 1,
            window: Window::from(Utc::now()),
        }],
    };
    store.replace_allocations(&meta(), vec![claim]).await.unwrap();
    let err = store.create_lease(&meta(), lease("a", "p", 1, 2, vec![hosts(1, 1, json!([]))])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    store.create_lease(&meta(), lease("a", "p", 1, 2, vec![slots(3, 1, None)])).await.unwrap();
    assert!(store.create_lease(&meta(), lease("b", "p", 1, 2, vec![slots(1, 1, None)])).await.is_err());
}

#[tokio::test]
async fn bad_dates_write_nothing() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "h", 4, json!({})).await;
    let past = NewLease {
        dates: LeaseDates::One {
            start: DateSpec::At(Utc::now() - Duration::hours(2)),
            end: DateSpec::At(t(1)),
            before_end: None,
        },
        ..lease("p", "p", 0, 1, vec![hosts(1, 1, json!([]))])
    };
    assert_eq!(store.create_lease(&meta(), past).await.unwrap_err().code, ErrorCode::InvalidDate);
    assert_eq!(
        store.create_lease(&meta(), lease("r", "p", 2, 1, vec![])).await.unwrap_err().code,
        ErrorCode::InvalidDate
    );
    assert!(store.leases(&Default::default()).await.unwrap().is_empty());
    // `now` starts at once.
    let now = NewLease {
        dates: LeaseDates::One { start: DateSpec::Now, end: DateSpec::At(t(1)), before_end: None },
        ..lease("n", "p", 0, 1, vec![hosts(1, 1, json!([]))])
    };
    let id = store.create_lease(&meta(), now).await.unwrap()[0].record.id;
    assert!(store.lease(id, None).await.unwrap().record.start <= Utc::now());
}

/// A creation reads its candidates in its first round trip when its
/// windows are fixed dates: a window that ends before it starts is still
/// refused as a bad date (400), never read with, and writes nothing.
#[tokio::test]
async fn a_window_ending_before_it_starts_is_refused_before_any_host_is_read() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "h", 4, json!({})).await;
    let backwards = lease("r", "p", 2, 1, vec![hosts(1, 1, json!([]))]);
    assert_eq!(store.create_lease(&meta(), backwards).await.unwrap_err().code, ErrorCode::InvalidDate);
    let empty = lease("e", "p", 2, 2, vec![slots(1, 1, None)]);
    assert_eq!(store.create_lease(&meta(), empty).await.unwrap_err().code, ErrorCode::InvalidDate);
    let recurring = NewLease {
        dates: LeaseDates::Recurring { occurrences: vec![(t(1), t(2)), (t(5), t(4))], time_zone: None },
        ..lease("rec", "p", 0, 1, vec![hosts(1, 1, json!([]))])
    };
    assert_eq!(store.create_lease(&meta(), recurring).await.unwrap_err().code, ErrorCode::InvalidDate);
    assert!(store.leases(&Default::default()).await.unwrap().is_empty());
    store.create_lease(&meta(), lease("ok", "p", 1, 2, vec![hosts(1, 1, json!([]))])).await.unwrap();
}

/// Every creation reads the hosts anew: one made unreservable after a
/// creation, or taken back, is seen so by the next.
#[tokio::test]
async fn a_host_made_unreservable_between_two_creations_is_seen_by_the_second() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let (a, b) = (host(&store, "a", 4, json!({})).await, host(&store, "b", 4, json!({})).await);
    let first = store.create_lease(&meta(), lease("1", "p", 1, 2, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let taken = first[0].record.reservations[0].slots[0].provider;
    let other = if taken == a { b } else { a };
    let reservable = |r| berth_store::commands::HostChange { reservable: Some(r), capabilities: BTreeMap::new() };
    store.update_host(&meta(), other, reservable(false)).await.unwrap();
    let e = store.create_lease(&meta(), lease("2", "p", 1, 2, vec![hosts(1, 1, json!([]))])).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Capacity, "{e}");
    store.update_host(&meta(), other, reservable(true)).await.unwrap();
    let second = store.create_lease(&meta(), lease("2", "p", 1, 2, vec![hosts(1, 1, json!([]))])).await.unwrap();
    assert_eq!(second[0].record.reservations[0].slots[0].provider, other);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn hosts_enrol_update_and_leave_when_free() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let h = host(&store, "h", 4, json!({"zone": "a"})).await;
    let again = store
        .enrol_host(
            &meta(),
            NewHost { name: "h".into(), resources: None, reservable: true, capabilities: BTreeMap::new() },
        )
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::HostExists);
    let missing = store
        .enrol_host(
            &meta(),
            NewHost { name: "nope".into(), resources: None, reservable: true, capabilities: BTreeMap::new() },
        )
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound);
    let change = berth_store::commands::HostChange {
        reservable: None,
        capabilities: BTreeMap::from([("zone".to_string(), json!(null)), ("gpus".to_string(), json!(2))]),
    };
    store.update_host(&meta(), h, change).await.unwrap();
    let got = store.host(h).await.unwrap();
    assert_eq!(got.capabilities, BTreeMap::from([("gpus".to_string(), json!(2))]));
    assert_eq!((got.vcpus, got.memory_mb, got.local_gb), (4, 4096, 100));
    let id =
        store.create_lease(&meta(), lease("a", "p", 1, 2, vec![hosts(1, 1, json!([]))])).await.unwrap()[0].record.id;
    let allocs = store.host_allocations(None, 1000, Default::default()).await.unwrap();
    assert_eq!(allocs[0].reservations.len(), 1);
    assert_eq!(store.remove_host(&meta(), h).await.unwrap_err().code, ErrorCode::HostInUse);
    store.delete_lease(&meta(), id, None).await.unwrap();
    store.remove_host(&meta(), h).await.unwrap();
    assert!(store.hosts(None, 1000).await.unwrap().is_empty());
    let props = store.host_properties(true).await.unwrap();
    assert_eq!(props.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["gpus", "zone"]);
    store.set_host_property(&meta(), "gpus", true).await.unwrap();
    assert_eq!(store.host_properties(false).await.unwrap().len(), 1);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn recurring_leases_book_every_occurrence_or_none() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "h", 4, json!({})).await;
    store.create_lease(&meta(), lease("blocker", "p", 49, 50, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let daily = |days: i64| NewLease {
        dates: LeaseDates::Recurring {
            occurrences: (0..days).map(|d| (t(24 * d + 1), t(24 * d + 2))).collect(),
            time_zone: None,
        },
        ..lease("daily", "p", 0, 1, vec![hosts(1, 1, json!([]))])
    };
    let err = store.create_lease(&meta(), daily(3)).await.unwrap_err();
    assert!(err.detail.contains("occurrence"), "{err}");
    assert!(store.leases(&Default::default()).await.unwrap().len() == 1);
    let made = store.create_lease(&meta(), daily(2)).await.unwrap();
    assert_eq!(made.len(), 2);
    // Each lease made is answered as a read shows it.
    for m in &made {
        assert_eq!(m, &store.lease(m.record.id, None).await.unwrap());
    }
    let l = store.lease(made[1].record.id, None).await.unwrap().record;
    assert_eq!((l.name.as_str(), l.start), ("daily-2", t(25)));
    assert!(l.recurrence_id.is_some());
}

mod cleaning;
mod draws;
mod flavors;
mod races;
mod shares;
mod transfers;
