//! Invariant 2: at no instant does a project's (or user's) usage of a class
//! exceed its limit, for changes made after the limit was set, whatever the
//! concurrency; deletes and shrinks never need quota.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use berth_core::dates::DateSpec;
use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::event::Allocation;
use berth_core::lease::Demand;
use berth_core::quota::Scope;
use berth_core::{Error, Window};
use berth_store::commands::{ConsumerAllocations, GenerationCheck, LeaseDates, LeaseUpdate, NewHost, NewLease};
use berth_store::commands::{NewReservation, ReservationUpdate};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Duration, DurationRound, Utc};
use common::*;
use serde_json::json;
use uuid::Uuid;

/// An hour boundary well in the future, so tests never race the clock.
fn t(h: i64) -> DateTime<Utc> {
    (Utc::now() + Duration::days(30)).duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(h)
}

fn w(a: i64, b: i64) -> Window {
    Window::new(t(a), Some(t(b))).unwrap()
}

fn claim(id: Uuid, project: &str, user: &str, allocations: Vec<Allocation>) -> ConsumerAllocations {
    ConsumerAllocations {
        consumer: id,
        project_id: project.into(),
        user_id: user.into(),
        consumer_type: None,
        generation: GenerationCheck::Any,
        allocations,
    }
}

async fn put(store: &Store, c: ConsumerAllocations) -> Result<(), Error> {
    store.replace_allocations(&meta(), vec![c]).await
}

async fn set(store: &Store, scope: Scope, limits: &[(&str, i64)]) -> Vec<berth_store::commands::OverLimit> {
    let limits = limits.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    store.set_quota(&meta(), scope, limits).await.unwrap()
}

fn assert_quota(r: Result<(), Error>, what: &str) -> Error {
    let e = r.expect_err(what);
    assert_eq!((e.kind, e.code), (ErrorKind::Quota, ErrorCode::QuotaExceeded), "{what}: {e}");
    e
}

async fn in_use(store: &Store, project: &str, user: Option<&str>, class: &str) -> (i64, i64) {
    let r = store.quota_usage(project, user, Utc::now(), Some(t(100)), Utc::now()).await.unwrap();
    r.usage.get(class).map(|u| (u.in_use, u.peak)).unwrap_or((0, 0))
}

async fn assert_replay_clean(store: &Store) {
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_claims_under_a_limit_of_ten_get_exactly_ten() {
    let db = TestDatabase::new().await;
    let store = db.store(40);
    let p = provider(&store, "big", &[("VCPU", 1000)]).await;
    set(&store, Scope::project("p"), &[("VCPU", 10)]).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(40));
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (store, barrier) = (store.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let c = claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 1, Window::from(Utc::now()))]);
            barrier.wait().await;
            put(&store, c).await
        }));
    }
    let mut granted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => granted += 1,
            Err(e) => {
                assert_eq!((e.kind, e.code), (ErrorKind::Quota, ErrorCode::QuotaExceeded), "{e}");
                assert!(e.detail.contains("VCPU") && e.detail.contains("limit 10"), "{e}");
            }
        }
    }
    assert_eq!(granted, 10);
    assert_eq!(in_use(&store, "p", None, "VCPU").await, (10, 10));
    // Another project is not held back.
    put(&store, claim(Uuid::new_v4(), "q", "u", vec![hold(p, "VCPU", 50, Window::from(Utc::now()))])).await.unwrap();
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn a_future_hold_is_refused_only_where_it_would_exceed() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let p = provider(&store, "big", &[("VCPU", 1000)]).await;
    set(&store, Scope::project("p"), &[("VCPU", 10)]).await;
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 8, w(2, 4))])).await.unwrap();
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 8, w(6, 8))])).await.unwrap();
    // Over the limit only during 3..4: refused, and the detail says so.
    let e = assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 3, w(3, 5))])).await, "3..5");
    assert!(e.detail.contains("in use 8") && e.detail.contains("requested 3"), "{e}");
    // Beside the others: granted, even at the full limit.
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 10, w(4, 6))])).await.unwrap();
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 2, w(0, 2))])).await.unwrap();
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 1, w(5, 6))])).await, "full");
    // Open-ended from later on counts from then.
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 10, Window::from(t(10)))])).await.unwrap();
    assert_quota(
        put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(p, "VCPU", 1, Window::from(t(50)))])).await,
        "open-ended",
    );
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn resize_counts_the_delta_move_nothing_and_delete_never_needs_quota() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let a = provider(&store, "a", &[("VCPU", 100), ("MEMORY_MB", 100_000)]).await;
    let b = provider(&store, "b", &[("VCPU", 100)]).await;
    set(&store, Scope::project("p"), &[("VCPU", 10)]).await;
    let now = Window::from(Utc::now());
    let (x, y) = (Uuid::new_v4(), Uuid::new_v4());
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 6, now)])).await.unwrap();
    put(&store, claim(y, "p", "u", vec![hold(a, "VCPU", 4, now)])).await.unwrap();
    // Full: growing x by one is refused, shrinking is not, growing back is.
    assert_quota(put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 7, now)])).await, "grow past");
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 5, now)])).await.unwrap();
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 6, now)])).await.unwrap();
    // A move (to b, and split over two providers) counts nothing new.
    put(&store, claim(x, "p", "u", vec![hold(b, "VCPU", 6, now)])).await.unwrap();
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 3, now), hold(b, "VCPU", 3, now)])).await.unwrap();
    // Another class without a limit is free; several consumers at once count together.
    put(
        &store,
        claim(x, "p", "u", vec![hold(a, "VCPU", 3, now), hold(b, "VCPU", 3, now), hold(a, "MEMORY_MB", 512, now)]),
    )
    .await
    .unwrap();
    let batch =
        vec![claim(x, "p", "u", vec![hold(a, "VCPU", 5, now)]), claim(y, "p", "u", vec![hold(a, "VCPU", 5, now)])];
    store.replace_allocations(&meta(), batch).await.unwrap();
    let batch =
        vec![claim(x, "p", "u", vec![hold(a, "VCPU", 7, now)]), claim(y, "p", "u", vec![hold(a, "VCPU", 4, now)])];
    assert_quota(store.replace_allocations(&meta(), batch).await, "batch of 11");
    // Deleting needs no quota, even over a lowered limit.
    set(&store, Scope::project("p"), &[("VCPU", 2)]).await;
    put(&store, claim(y, "p", "u", vec![])).await.unwrap();
    assert_eq!(in_use(&store, "p", None, "VCPU").await.0, 5);
    // A consumer moving to another project counts there in full.
    set(&store, Scope::project("q"), &[("VCPU", 4)]).await;
    assert_quota(put(&store, claim(x, "q", "u", vec![hold(a, "VCPU", 5, now)])).await, "into q");
    put(&store, claim(x, "q", "u", vec![hold(a, "VCPU", 4, now)])).await.unwrap();
    assert_eq!(in_use(&store, "p", None, "VCPU").await.0, 0);
    assert_eq!(in_use(&store, "q", None, "VCPU").await.0, 4);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn users_are_held_within_their_project() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let a = provider(&store, "a", &[("VCPU", 100)]).await;
    set(&store, Scope::project("p"), &[("VCPU", 10)]).await;
    set(&store, Scope::user("p", "u1"), &[("VCPU", 3)]).await;
    let now = Window::from(Utc::now());
    for _ in 0..3 {
        put(&store, claim(Uuid::new_v4(), "p", "u1", vec![hold(a, "VCPU", 1, now)])).await.unwrap();
    }
    let e = assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u1", vec![hold(a, "VCPU", 1, now)])).await, "u1");
    assert!(e.detail.contains("user u1 in project p") && e.detail.contains("limit 3"), "{e}");
    put(&store, claim(Uuid::new_v4(), "p", "u2", vec![hold(a, "VCPU", 7, now)])).await.unwrap();
    let e = assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u2", vec![hold(a, "VCPU", 1, now)])).await, "p");
    assert!(e.detail.contains("of project p:") && e.detail.contains("limit 10"), "{e}");
    assert_eq!(in_use(&store, "p", Some("u1"), "VCPU").await.0, 3);
    assert_eq!(in_use(&store, "p", Some("u2"), "VCPU").await.0, 7);
    // The user's limit falls back to the project's: the effective limits say so.
    let limits = store.quota_limits(&Scope::user("p", "u2")).await.unwrap();
    assert_eq!(limits.effective_user()["VCPU"], 10);
    assert_eq!(store.quota_limits(&Scope::user("p", "u1")).await.unwrap().effective_user()["VCPU"], 3);
}

#[tokio::test]
async fn a_lowered_limit_is_reported_and_blocks_increases_until_usage_is_under_it() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let a = provider(&store, "a", &[("VCPU", 100)]).await;
    let now = Window::from(Utc::now());
    let x = Uuid::new_v4();
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 8, now)])).await.unwrap();
    let over = set(&store, Scope::project("p"), &[("VCPU", 5)]).await;
    assert_eq!(over.len(), 1, "{over:?}");
    assert_eq!((over[0].resource.as_str(), over[0].limit, over[0].usage), ("VCPU", 5, 8));
    // The log shows it once no older transaction (of any test on the server) is still open.
    let mut recorded = false;
    for _ in 0..200 {
        let log = store.read_log(berth_store::Cursor::START, 1000).await.unwrap();
        recorded = log.iter().any(|e| e.event_type == "QuotaOverLimit" && e.data["usage"] == 8);
        if recorded {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(recorded, "no over-limit event in the log");
    let report = store.quota_usage("p", None, Utc::now(), None, Utc::now()).await.unwrap();
    assert!(report.usage["VCPU"].over_limit && report.usage["VCPU"].limit == 5);
    // Nothing was taken away; increases are refused, shrinking is not.
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await, "new");
    assert_quota(put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 9, now)])).await, "grow");
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 6, now)])).await.unwrap();
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await, "still over");
    put(&store, claim(x, "p", "u", vec![hold(a, "VCPU", 4, now)])).await.unwrap();
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await.unwrap();
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await, "at 5");
    // Raising it back lets increases through; nothing is reported.
    assert!(set(&store, Scope::project("p"), &[("VCPU", 6)]).await.is_empty());
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await.unwrap();
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn defaults_fall_back_and_minus_one_or_nothing_is_unlimited() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let a = provider(&store, "a", &[("VCPU", 1000)]).await;
    let now = Window::from(Utc::now());
    // Nothing set: unlimited.
    put(&store, claim(Uuid::new_v4(), "big", "u", vec![hold(a, "VCPU", 500, now)])).await.unwrap();
    // A default below what "big" holds: accepted, reported for "big".
    let over = set(&store, Scope::defaults(), &[("VCPU", 4)]).await;
    assert_eq!(over.len(), 1);
    assert_eq!((over[0].scope.clone(), over[0].usage), (Scope::project("big"), 500));
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 4, now)])).await.unwrap();
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await, "default");
    // A project's own -1 is unlimited, whatever the default.
    set(&store, Scope::project("p"), &[("VCPU", -1)]).await;
    put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 100, now)])).await.unwrap();
    // Unset: back to the default, and over it (reported).
    let over = store.unset_quota(&meta(), Scope::project("p"), vec![]).await.unwrap();
    assert_eq!(over.len(), 1);
    assert_eq!((over[0].limit, over[0].usage), (4, 104));
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(a, "VCPU", 1, now)])).await, "back");
    assert_eq!(store.quota_limits(&Scope::project("p")).await.unwrap().effective_project()["VCPU"], 4);
    // Bad limits write nothing.
    let bad = BTreeMap::from([("VCPU".to_string(), -2)]);
    assert_eq!(store.set_quota(&meta(), Scope::project("p"), bad).await.unwrap_err().code, ErrorCode::QuotaInvalid);
    let bad = BTreeMap::from([("nonsense".to_string(), 1)]);
    assert_eq!(store.set_quota(&meta(), Scope::project("p"), bad).await.unwrap_err().code, ErrorCode::QuotaInvalid);
    assert_replay_clean(&store).await;
}

// Leases: the whole lease is checked, and the number of leases not ended.

async fn host(store: &Store, name: &str, vcpus: i64) -> Uuid {
    store
        .enrol_host(
            &meta(),
            NewHost {
                name: name.into(),
                resources: Some((vcpus, 4096, 100)),
                reservable: true,
                capabilities: Default::default(),
            },
        )
        .await
        .unwrap()
}

fn slots(amount: u32, vcpus: i64) -> NewReservation {
    NewReservation {
        resource_type: "virtual:instance".into(),
        params: json!({"amount": amount, "vcpus": vcpus}),
        demand: Demand::Slots {
            amount,
            resources: BTreeMap::from([("VCPU".to_string(), vcpus)]),
            affinity: None,
            resource_properties: None,
            traits: Default::default(),
        },
    }
}

fn lease(name: &str, start: i64, end: i64, reservations: Vec<NewReservation>) -> NewLease {
    NewLease {
        name: name.into(),
        project_id: "p".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(t(start)), end: DateSpec::At(t(end)), before_end: None },
        reservations,
    }
}

#[tokio::test]
async fn leases_are_checked_whole_over_their_window_and_counted() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "h1", 64).await;
    host(&store, "h2", 64).await;
    set(&store, Scope::project("p"), &[("VCPU", 10), ("leases", 3)]).await;
    store.create_lease(&meta(), lease("a", 2, 4, vec![slots(4, 2)])).await.unwrap();
    // Two reservations that fit alone but not together: none is written.
    let e = store.create_lease(&meta(), lease("b", 3, 5, vec![slots(1, 2), slots(1, 1)])).await.unwrap_err();
    assert_eq!((e.kind, e.code), (ErrorKind::Quota, ErrorCode::QuotaExceeded), "{e}");
    assert_eq!(store.leases(&Default::default()).await.unwrap().len(), 1);
    // Beside it in time: granted in full.
    store.create_lease(&meta(), lease("c", 4, 6, vec![slots(5, 2)])).await.unwrap();
    // Extending "a" into "c" would exceed: refused; shrinking is fine.
    let id = store.leases(&Default::default()).await.unwrap().iter().find(|l| l.record.name == "a").unwrap().record.id;
    let longer = LeaseUpdate { end: Some(DateSpec::At(t(5))), ..Default::default() };
    let e = store.update_lease(&meta(), id, None, longer).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::QuotaExceeded, "{e}");
    let a = store.lease(id, None).await.unwrap();
    let bigger = LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id: a.record.reservations[0].id,
            params: json!({"amount": 5, "vcpus": 2}),
            demand: slots(5, 2).demand,
        }],
        ..Default::default()
    };
    store.update_lease(&meta(), id, None, bigger).await.unwrap();
    let more = LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id: a.record.reservations[0].id,
            params: json!({"amount": 6, "vcpus": 2}),
            demand: slots(6, 2).demand,
        }],
        ..Default::default()
    };
    assert_eq!(store.update_lease(&meta(), id, None, more).await.unwrap_err().code, ErrorCode::QuotaExceeded);
    // Lease count: 2 held, limit 3.
    store.create_lease(&meta(), lease("d", 20, 21, vec![])).await.unwrap();
    let e = store.create_lease(&meta(), lease("e", 30, 31, vec![])).await.unwrap_err();
    assert!(e.code == ErrorCode::QuotaExceeded && e.detail.contains("leases"), "{e}");
    store.delete_lease(&meta(), id, None).await.unwrap();
    store.create_lease(&meta(), lease("e", 30, 31, vec![])).await.unwrap();
    let report = store.quota_usage("p", None, Utc::now(), Some(t(100)), Utc::now()).await.unwrap();
    assert_eq!(report.usage["leases"].in_use, 3);
    assert_eq!(report.usage["VCPU"].peak, 10);
    assert_eq!(report.usage["VCPU"].in_use, 0);
    assert_replay_clean(&store).await;
}

/// A creation reads the limits bearing on it (the defaults, the project's,
/// the user's) in its first round trip, and reads the usage only when one
/// does: a limit set at any of the three scopes after one creation bears on
/// the next; one unset no longer does.
#[tokio::test]
async fn a_limit_set_between_two_creations_bears_on_the_next() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    host(&store, "h1", 64).await;
    store.create_lease(&meta(), lease("a", 40, 41, vec![slots(1, 3)])).await.unwrap();
    for (n, scope) in [Scope::defaults(), Scope::project("p"), Scope::user("p", "u")].into_iter().enumerate() {
        let (start, end) = (10 * n as i64 + 1, 10 * n as i64 + 2);
        set(&store, scope.clone(), &[("VCPU", 3)]).await;
        let e =
            store.create_lease(&meta(), lease(&format!("over-{n}"), start, end, vec![slots(1, 4)])).await.unwrap_err();
        assert_eq!((e.kind, e.code), (ErrorKind::Quota, ErrorCode::QuotaExceeded), "{scope:?}: {e}");
        store.create_lease(&meta(), lease(&format!("under-{n}"), start, end, vec![slots(1, 3)])).await.unwrap();
        store.unset_quota(&meta(), scope, vec![]).await.unwrap();
        store.create_lease(&meta(), lease(&format!("free-{n}"), start, end, vec![slots(1, 4)])).await.unwrap();
    }
    // Counted leases too, by the same first read: 7 made.
    set(&store, Scope::project("p"), &[("leases", 7)]).await;
    let e = store.create_lease(&meta(), lease("eighth", 50, 51, vec![])).await.unwrap_err();
    assert!(e.code == ErrorCode::QuotaExceeded && e.detail.contains("leases"), "{e}");
    assert_eq!(store.leases(&Default::default()).await.unwrap().len(), 7);
    assert_replay_clean(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_leases_under_a_limit_of_ten_get_exactly_ten() {
    let db = TestDatabase::new().await;
    let store = db.store(40);
    for i in 0..4 {
        host(&store, &format!("h{i}"), 64).await;
    }
    set(&store, Scope::project("p"), &[("VCPU", 10)]).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(40));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let (store, barrier) = (store.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            store.create_lease(&meta(), lease(&format!("l{i}"), 1, 3, vec![slots(1, 1)])).await
        }));
    }
    let mut granted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => granted += 1,
            Err(e) => assert_eq!((e.kind, e.code), (ErrorKind::Quota, ErrorCode::QuotaExceeded), "{e}"),
        }
    }
    assert_eq!(granted, 10);
    let report = store.quota_usage("p", None, t(1), Some(t(3)), Utc::now()).await.unwrap();
    assert_eq!(report.usage["VCPU"].peak, 10);
}

#[tokio::test]
async fn drawing_from_a_reservation_counts_once() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let h = host(&store, "h", 8).await;
    set(&store, Scope::project("p"), &[("VCPU", 4)]).await;
    let now = NewLease {
        dates: LeaseDates::One { start: DateSpec::Now, end: DateSpec::At(t(5)), before_end: None },
        ..lease("l", 0, 1, vec![slots(1, 4)])
    };
    let id = store.create_lease(&meta(), now).await.unwrap()[0].record.id;
    let l = store.lease(id, None).await.unwrap().record;
    let class = berth_core::lease::reservation_class(l.reservations[0].id);
    let from_now = Window::from(Utc::now());
    // The project holds its whole limit through the lease; an instance drawing
    // from the reservation moves usage within the project, adding nothing.
    let x = Uuid::new_v4();
    let draw = vec![hold(h, "VCPU", 2, from_now), hold(h, &class, 1, from_now)];
    put(&store, claim(x, "p", "u", draw)).await.unwrap();
    assert_quota(put(&store, claim(Uuid::new_v4(), "p", "u", vec![hold(h, "VCPU", 1, from_now)])).await, "on top");
    // Giving it back needs no quota either.
    put(&store, claim(x, "p", "u", vec![])).await.unwrap();
    assert_eq!(in_use(&store, "p", None, "VCPU").await.0, 4);
    assert_replay_clean(&store).await;
}

/// Upgrading to the schema where allocations carry their consumer's project
/// and user fills both in for the allocations already there; upgrading to
/// the open-ended sums (V32, V34) sums what is already held.
#[tokio::test]
async fn the_upgrade_gives_existing_allocations_their_project_and_user_and_sums_open_ended_holds() {
    let db = TestDatabase::new().await;
    let (admin, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let name = format!("{}_upgrade", db.name);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let url = db.url.replacen(&db.name, &name, 1);
    let store = Store::connect(&url, 2).unwrap();
    store.migrate_to(30).await.unwrap();
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute(
        "INSERT INTO providers (uuid, name, generation, root_uuid, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000001', 'p', 1, '00000000-0000-4000-8000-000000000001', now(), now());
         INSERT INTO consumers (uuid, project_id, user_id, generation, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000002', 'p1', 'u1', 1, now(), now());
         INSERT INTO allocations (consumer_uuid, provider_uuid, resource_class, used, during)
             VALUES ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'VCPU', 2,
                     tstzrange(now(), NULL)),
                    ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'VCPU', 3,
                     tstzrange(now() + interval '1 day', NULL)),
                    ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'VCPU', 5,
                     tstzrange(now(), now() + interval '1 hour'));",
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    let rows = c.query("SELECT DISTINCT project_id, user_id FROM allocations", &[]).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].get::<_, String>("project_id"), rows[0].get::<_, String>("user_id")),
        ("p1".to_string(), "u1".to_string())
    );
    // The open-ended holds are summed (V32, V34); the bounded one is not.
    let by_provider: i64 = c.query_one("SELECT used FROM provider_open_usage", &[]).await.unwrap().get("used");
    assert_eq!(by_provider, 5);
    let row =
        c.query_one("SELECT project_id, user_id, resource_class, used FROM project_open_usage", &[]).await.unwrap();
    assert_eq!(
        (
            row.get::<_, String>("project_id"),
            row.get::<_, String>("user_id"),
            row.get::<_, String>("resource_class"),
            row.get::<_, i64>("used"),
        ),
        ("p1".to_string(), "u1".to_string(), "VCPU".to_string(), 5)
    );
}
