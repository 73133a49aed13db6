//! Invariant 1: at no instant of any window does the sum of allocations on a
//! provider and class exceed its capacity, whatever the concurrency.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use berth_core::error::ErrorKind;
use berth_core::{timeline, Window};
use berth_store::commands::GenerationCheck;
use berth_store::testing::TestDatabase;
use chrono::{Duration, TimeZone, Utc};
use common::*;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

const WRITERS: usize = 32;
const ROUNDS: usize = 25;
const CAPACITY: i64 = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_never_push_an_instant_over_capacity() {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS);
    let mut providers = Vec::new();
    for i in 0..4 {
        providers.push(provider(&store, &format!("small-{i}"), &[("VCPU", CAPACITY)]).await);
    }
    let providers = Arc::new(providers);
    let t0 = Utc.with_ymd_and_hms(2031, 1, 1, 0, 0, 0).unwrap();
    let granted = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (store, providers, granted, refused) = (store.clone(), providers.clone(), granted.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
            let mut mine: Vec<Uuid> = Vec::new();
            for _ in 0..ROUNDS {
                let p = providers[rng.gen_range(0..providers.len())];
                let start = t0 + Duration::hours(rng.gen_range(0..48));
                let window = if rng.gen_bool(0.1) {
                    Window::from(start)
                } else {
                    Window::new(start, Some(start + Duration::hours(rng.gen_range(1..12)))).unwrap()
                };
                let used = rng.gen_range(1..=4);
                // Mostly new claims; sometimes move or resize one of ours (two providers, one consumer).
                let (id, check) = match mine.last() {
                    Some(id) if rng.gen_bool(0.3) => (*id, GenerationCheck::Any),
                    _ => (Uuid::new_v4(), GenerationCheck::New),
                };
                let req = consumer(id, check, vec![hold(p, "VCPU", used, window)]);
                match store.replace_allocations(&meta(), vec![req]).await {
                    Ok(()) => {
                        granted.fetch_add(1, Ordering::Relaxed);
                        if !mine.contains(&id) {
                            mine.push(id);
                        }
                    }
                    Err(e) if e.kind == ErrorKind::Capacity => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (granted, refused) = (granted.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    // The run must have contended: both outcomes occurred.
    assert!(granted > 20 && refused > 20, "granted {granted}, refused {refused}");

    // Every instant of every provider's timeline is within capacity.
    let everything = Window::from(t0 - Duration::days(1));
    for p in providers.iter() {
        let rows = store.provider_allocations(*p, None).await.unwrap();
        let holds: Vec<(Window, i64)> = rows.iter().map(|r| (r.window, r.used)).collect();
        // Check at every start point (where the sum can rise), independently of the sweep.
        for (w, _) in &holds {
            let at_start: i64 = holds.iter().filter(|(o, _)| o.contains(w.start)).map(|(_, u)| u).sum();
            assert!(at_start <= CAPACITY, "provider {p}: {at_start} VCPU at {}", w.start);
        }
        assert!(timeline::peak(&holds, &everything) <= CAPACITY);
    }
    open_usage_matches_allocations(&db.url).await;
    assert!(store.replay_verify().await.unwrap().is_clean());
}

#[tokio::test]
async fn back_to_back_windows_fit_and_overlapping_ones_compete() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let p = provider(&store, "h", &[("VCPU", 4)]).await;
    let t = |h| Utc.with_ymd_and_hms(2031, 1, 1, h, 0, 0).unwrap();
    let w = |a, b| Window::new(t(a), Some(t(b))).unwrap();
    let claim = |used, window| consumer(Uuid::new_v4(), GenerationCheck::New, vec![hold(p, "VCPU", used, window)]);
    store.replace_allocations(&meta(), vec![claim(4, w(1, 2))]).await.unwrap();
    store.replace_allocations(&meta(), vec![claim(4, w(2, 3))]).await.unwrap();
    let err = store.replace_allocations(&meta(), vec![claim(1, w(1, 3))]).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    // An open-ended hold from now competes with every future window.
    let err = store.replace_allocations(&meta(), vec![claim(1, Window::from(t(0)))]).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    store.replace_allocations(&meta(), vec![claim(4, Window::from(t(3)))]).await.unwrap();
    // Several consumers in one request count together.
    let q = provider(&store, "q", &[("VCPU", 4)]).await;
    let two = vec![
        consumer(Uuid::new_v4(), GenerationCheck::New, vec![hold(q, "VCPU", 3, w(1, 2))]),
        consumer(Uuid::new_v4(), GenerationCheck::New, vec![hold(q, "VCPU", 3, w(1, 2))]),
    ];
    assert_eq!(store.replace_allocations(&meta(), two).await.unwrap_err().kind, ErrorKind::Capacity);
    let rows: HashMap<Uuid, i64> =
        store.provider_allocations(q, None).await.unwrap().into_iter().map(|r| (r.consumer, r.used)).collect();
    assert!(rows.is_empty(), "a refused batch wrote nothing");
}

/// Claims from now on, open-ended (as Placement makes them), counted against
/// what earlier claims hold from before them: exactly the capacity is
/// granted, and what a delete gives back is granted again, no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_ended_claims_from_now_get_exactly_the_capacity() {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS);
    let p = provider(&store, "small", &[("VCPU", CAPACITY)]).await;
    let claim_many = |n: usize| {
        let store = store.clone();
        async move {
            let mut tasks = Vec::new();
            for _ in 0..n {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    let id = Uuid::new_v4();
                    let req = consumer(id, GenerationCheck::New, vec![hold(p, "VCPU", 1, Window::from(Utc::now()))]);
                    match store.replace_allocations(&meta(), vec![req]).await {
                        Ok(()) => Some(id),
                        Err(e) if e.kind == ErrorKind::Capacity => None,
                        Err(e) => panic!("unexpected error: {e}"),
                    }
                }));
            }
            let mut granted = Vec::new();
            for t in tasks {
                granted.extend(t.await.unwrap());
            }
            granted
        }
    };
    let granted = claim_many(40).await;
    assert_eq!(granted.len(), CAPACITY as usize);
    for id in &granted[..3] {
        store.delete_allocations(&meta(), *id).await.unwrap();
    }
    let again = claim_many(40).await;
    assert_eq!(again.len(), 3, "what the deletes gave back, no more");
    let rows = store.provider_allocations(p, None).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.used).sum::<i64>(), CAPACITY);
    assert_eq!(open_usage_matches_allocations(&db.url).await, 1);
    assert!(store.replay_verify().await.unwrap().is_clean());
}

/// Claims of one project and user decided by several lanes at once add to
/// several stripes of the project's open-ended sum (each lane its own):
/// added up, the stripes still equal the open-ended allocations, through
/// claims, moves and deletes that land in other lanes than the claim did.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_project_claimed_in_many_lanes_sums_to_its_allocations() {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS).with_claim_lanes(4);
    let mut providers = Vec::new();
    for i in 0..8 {
        providers.push(provider(&store, &format!("big-{i}"), &[("VCPU", 100_000)]).await);
    }
    let providers = Arc::new(providers);
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (store, providers) = (store.clone(), providers.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(100 + w as u64);
            let mut mine: Vec<Uuid> = Vec::new();
            for _ in 0..ROUNDS {
                let p = providers[rng.gen_range(0..providers.len())];
                if !mine.is_empty() && rng.gen_bool(0.15) {
                    let id = mine.swap_remove(rng.gen_range(0..mine.len()));
                    store.delete_allocations(&meta(), id).await.unwrap();
                    continue;
                }
                // Mostly new claims; sometimes a move or resize of one of ours.
                let (id, check) = match mine.last() {
                    Some(id) if rng.gen_bool(0.3) => (*id, GenerationCheck::Any),
                    _ => (Uuid::new_v4(), GenerationCheck::New),
                };
                let req = consumer(id, check, vec![hold(p, "VCPU", rng.gen_range(1..=4), Window::from(Utc::now()))]);
                store.replace_allocations(&meta(), vec![req]).await.unwrap();
                if !mine.contains(&id) {
                    mine.push(id);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let stripes: i64 = c.query_one("SELECT count(DISTINCT stripe) FROM project_open_usage", &[]).await.unwrap().get(0);
    assert!(stripes > 1, "the lanes wrote {stripes} stripe(s) of the project's sum");
    assert_eq!(open_usage_matches_allocations(&db.url).await, 8);
    assert!(store.replay_verify().await.unwrap().is_clean());
}

/// Lanes that wait for fuller batches (here with no bound of their own:
/// only the batch in flight ending or halfway ends a wait) answer every
/// claim of many writers, and the claims keep to capacity and replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lanes_waiting_for_fuller_batches_answer_every_claim() {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS).with_claim_gather(std::time::Duration::from_secs(3600));
    let mut providers = Vec::new();
    for i in 0..4 {
        providers.push(provider(&store, &format!("gather-{i}"), &[("VCPU", CAPACITY)]).await);
    }
    let providers = Arc::new(providers);
    let (made, refused) = (Arc::new(std::sync::Mutex::new(Vec::new())), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (store, providers, made, refused) = (store.clone(), providers.clone(), made.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(300 + w as u64);
            for _ in 0..ROUNDS {
                let p = providers[rng.gen_range(0..providers.len())];
                let id = Uuid::new_v4();
                let req = consumer(id, GenerationCheck::New, vec![hold(p, "VCPU", 1, Window::from(Utc::now()))]);
                match store.replace_allocations(&meta(), vec![req]).await {
                    Ok(()) => made.lock().unwrap().push(id),
                    Err(e) if e.kind == ErrorKind::Capacity => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("a claim failed: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let made = made.lock().unwrap().clone();
    assert_eq!(made.len() + refused.load(Ordering::Relaxed), WRITERS * ROUNDS, "every claim answered");
    assert_eq!(made.len(), providers.len() * CAPACITY as usize, "the providers filled, no more");
    // A claim arriving alone, with no batch in flight, is decided at once.
    store.delete_allocations(&meta(), made[0]).await.unwrap();
    let again = |p| consumer(Uuid::new_v4(), GenerationCheck::New, vec![hold(p, "VCPU", 1, Window::from(Utc::now()))]);
    let m = meta();
    let answers = futures::future::join_all(providers.iter().map(|p| store.replace_allocations(&m, vec![again(*p)])));
    assert_eq!(answers.await.iter().filter(|a| a.is_ok()).count(), 1, "what the delete gave back, no more");
    assert_eq!(open_usage_matches_allocations(&db.url).await, 4);
    assert!(store.replay_verify().await.unwrap().is_clean());
}
