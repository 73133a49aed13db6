//! Creations racing for hosts: a new lease locks only the hosts it chose on
//! a read taken without locks, and checks its choice again under their
//! locks. Another session holds the hosts' rows here until every creation
//! waits for them, so the race is sure to happen.

use std::time::Duration as Wait;

use tokio_postgres::NoTls;

use super::*;

/// Holds `providers`' rows in a session of its own, as a command would.
async fn hold_rows(db: &TestDatabase, providers: &[Uuid]) -> tokio_postgres::Client {
    let (blocker, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    blocker.batch_execute("BEGIN").await.unwrap();
    blocker.query("SELECT 1 FROM providers WHERE uuid = ANY($1) FOR UPDATE", &[&providers]).await.unwrap();
    blocker
}

/// Waits until `n` sessions wait for a row lock. Asked from a session of
/// its own: a transaction sees the activity as it was at its first look.
async fn until_waiting(db: &TestDatabase, n: i64) {
    let (watcher, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..500 {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Wait::from_millis(10)).await;
    }
    panic!("{n} creations never came to wait for the host");
}

/// The peak of VCPU held on `provider` over hours `[from, to)`.
async fn peak_vcpus(store: &Store, provider: Uuid, from: i64, to: i64) -> i64 {
    let mut peak = 0;
    for h in from..to {
        let used = store.provider_usage_at(provider, t(h) + Duration::minutes(30)).await.unwrap();
        peak = peak.max(used.get("VCPU").copied().unwrap_or(0));
    }
    peak
}

#[tokio::test]
async fn creations_racing_for_the_last_host_leave_one_winner_and_409s() {
    let db = TestDatabase::new().await;
    let store = db.store(10);
    let last = host(&store, "last", 8, json!({})).await;
    let booked = host(&store, "booked", 8, json!({})).await;
    store.create_lease(&meta(), lease("before", "p", 0, 10, vec![hosts(1, 1, json!([]))])).await.unwrap();
    assert_eq!(peak_vcpus(&store, last, 0, 10).await + peak_vcpus(&store, booked, 0, 10).await, 8);
    let free = if peak_vcpus(&store, last, 0, 10).await == 0 { last } else { booked };
    let blocker = hold_rows(&db, &[free]).await;
    let racers = 8;
    let mut tasks = Vec::new();
    for k in 0..racers {
        let store = store.clone();
        let new = lease(&format!("racer-{k}"), "p", 2 + k % 3, 5 + k % 3, vec![hosts(1, 1, json!([]))]);
        tasks.push(tokio::spawn(async move { store.create_lease(&meta(), new).await }));
    }
    until_waiting(&db, racers).await;
    blocker.batch_execute("ROLLBACK").await.unwrap();
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(made) => {
                won += 1;
                assert_eq!(made[0].record.reservations[0].slots[0].provider, free);
            }
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Capacity, "{e:?}");
                assert_eq!(e.code, "berth.lease.reservation_0.no_capacity");
            }
        }
    }
    assert_eq!(won, 1, "exactly one creation takes the last host");
    assert_eq!(peak_vcpus(&store, free, 0, 10).await, 8, "never held twice at any instant");
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn a_creation_that_lost_its_host_takes_another_free_one() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let a = host(&store, "a", 8, json!({})).await;
    let b = host(&store, "b", 8, json!({})).await;
    // A lease ending at hour 1 on one host makes it the tighter fit for [1, 2).
    let near = store.create_lease(&meta(), lease("near", "p", 0, 1, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let tight = near[0].record.reservations[0].slots[0].provider;
    let other = if tight == a { b } else { a };
    let blocker = hold_rows(&db, &[tight]).await;
    let mut tasks = Vec::new();
    for k in 0..2 {
        let store = store.clone();
        let new = lease(&format!("racer-{k}"), "p", 1, 2, vec![hosts(1, 1, json!([]))]);
        tasks.push(tokio::spawn(async move { store.create_lease(&meta(), new).await }));
    }
    // Both chose the tighter host and wait for it.
    until_waiting(&db, 2).await;
    blocker.batch_execute("ROLLBACK").await.unwrap();
    let mut placed = Vec::new();
    for t in tasks {
        let made = t.await.unwrap().expect("both fit: one on each host");
        placed.push(made[0].record.reservations[0].slots[0].provider);
    }
    placed.sort();
    let mut want = vec![tight, other];
    want.sort();
    assert_eq!(placed, want, "the loser retried onto the other free host");
    assert_eq!(peak_vcpus(&store, tight, 1, 2).await, 8);
    assert_eq!(peak_vcpus(&store, other, 1, 2).await, 8);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn many_creations_at_once_never_book_a_host_twice() {
    let db = TestDatabase::new().await;
    let store = db.store(10);
    let mut ids = Vec::new();
    for k in 0..3 {
        ids.push(host(&store, &format!("h{k}"), 8, json!({})).await);
    }
    let mut tasks = Vec::new();
    for k in 0..24i64 {
        let store = store.clone();
        let new = lease(&format!("l{k}"), "p", k % 4, k % 4 + 2, vec![hosts(1, 1, json!([]))]);
        tasks.push(tokio::spawn(async move { store.create_lease(&meta(), new).await }));
    }
    let made = count_made(tasks).await;
    // Hours [0, 6): at most three hosts at each instant, each held once.
    for id in &ids {
        assert!(peak_vcpus(&store, *id, 0, 6).await <= 8);
    }
    // Three hosts over six hours hold at most nine two-hour leases.
    assert!((3..=9).contains(&made), "made {made}");
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn drawn_ties_spread_new_leases_over_hosts_alike_and_names_do_not() {
    let db = TestDatabase::new().await;
    let mut ids = Vec::new();
    for k in 0..8 {
        ids.push(host(&db.store(2), &format!("h{k}"), 8, json!({})).await);
    }
    // 400 days apart: beyond best fit's horizon, every host is as good.
    let apart = |k: i64| 24 * 400 * k;
    let on = |made: Vec<berth_store::queries::leases::Lease>| made[0].record.reservations[0].slots[0].provider;
    let (by_name, drawn) = (db.store(2), db.store(2).with_drawn_ties(true));
    let mut named = std::collections::BTreeSet::new();
    let mut spread = std::collections::BTreeSet::new();
    for k in 0..6 {
        let new = |n: &str| lease(&format!("{n}-{k}"), "p", apart(k), apart(k) + 1, vec![hosts(1, 1, json!([]))]);
        named.insert(on(by_name.create_lease(&meta(), new("named")).await.unwrap()));
        spread.insert(on(drawn.create_lease(&meta(), new("drawn")).await.unwrap()));
    }
    assert_eq!(named.len(), 1, "by name, every lease takes the first host");
    assert!(spread.len() > 1, "six draws over eight hosts alike all took one host");
    assert_replay_clean(&drawn).await;
}

/// Holds `provider`'s row and marks it as a new lease writing it does.
async fn hold_written(db: &TestDatabase, provider: Uuid) -> tokio_postgres::Client {
    let writer = hold_rows(db, &[provider]).await;
    berth_store::testing::mark_written(&writer, provider).await.unwrap();
    writer
}

/// Awaits `task`, failing if any session of the database waits for a lock
/// before it ends: a creation that queued would wait until the test let go.
async fn without_waiting<T>(db: &TestDatabase, task: tokio::task::JoinHandle<T>) -> T {
    let (watcher, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    while !task.is_finished() {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(waiting, 0, "a creation queued for a host another creation is writing");
        tokio::time::sleep(Wait::from_millis(5)).await;
    }
    task.await.unwrap()
}

fn placed_on(made: &[berth_store::queries::leases::Lease]) -> Uuid {
    made[0].record.reservations[0].slots[0].provider
}

#[tokio::test]
async fn a_creation_passes_over_a_host_another_creation_is_writing() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let a = host(&store, "a", 8, json!({})).await;
    let b = host(&store, "b", 8, json!({})).await;
    // A lease ending at hour 1 on one host makes it the tighter fit for [1, 2).
    let near = store.create_lease(&meta(), lease("near", "p", 0, 1, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let tight = placed_on(&near);
    let other = if tight == a { b } else { a };
    let writer = hold_written(&db, tight).await;
    let new = lease("next", "p", 1, 2, vec![hosts(1, 1, json!([]))]);
    let creating = {
        let store = store.clone();
        tokio::spawn(async move { store.create_lease(&meta(), new).await })
    };
    let made = without_waiting(&db, creating).await.expect("the other host is free");
    assert_eq!(placed_on(&made), other, "the host being written is passed over, not waited for");
    writer.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(peak_vcpus(&store, other, 1, 2).await, 8);
    assert_eq!(peak_vcpus(&store, tight, 1, 2).await, 0);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn a_creation_that_fits_only_where_another_is_writing_waits_for_it() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let only = host(&store, "only", 8, json!({})).await;
    let writer = hold_written(&db, only).await;
    let new = lease("next", "p", 1, 2, vec![hosts(1, 1, json!([]))]);
    let creating = {
        let store = store.clone();
        tokio::spawn(async move { store.create_lease(&meta(), new).await })
    };
    until_waiting(&db, 1).await;
    // The writer gives up: the host is free, and the creation takes it.
    writer.batch_execute("ROLLBACK").await.unwrap();
    let made = creating.await.unwrap().expect("never refused for a host only being written");
    assert_eq!(placed_on(&made), only);
    assert_eq!(peak_vcpus(&store, only, 1, 2).await, 8);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn a_refusal_waits_for_the_hosts_being_written() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let only = host(&store, "only", 8, json!({})).await;
    store.create_lease(&meta(), lease("booked", "p", 0, 10, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let writer = hold_written(&db, only).await;
    let new = lease("late", "p", 2, 5, vec![hosts(1, 1, json!([]))]);
    let creating = {
        let store = store.clone();
        tokio::spawn(async move { store.create_lease(&meta(), new).await })
    };
    // Refused only under the lock of every candidate: it waits for the writer.
    until_waiting(&db, 1).await;
    writer.batch_execute("ROLLBACK").await.unwrap();
    let e = creating.await.unwrap().expect_err("the only host is booked");
    assert_eq!(e.kind, ErrorKind::Capacity, "{e:?}");
    assert_eq!(e.code, "berth.lease.reservation_0.no_capacity");
    assert_eq!(peak_vcpus(&store, only, 0, 10).await, 8);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn creations_passing_over_each_other_never_book_a_host_twice() {
    let db = TestDatabase::new().await;
    let store = db.store(12).with_drawn_ties(true);
    let mut ids = Vec::new();
    for k in 0..6 {
        ids.push(host(&store, &format!("h{k}"), 8, json!({})).await);
    }
    let mut tasks = Vec::new();
    for k in 0..48i64 {
        let store = store.clone();
        // Every third asks for two hosts at once.
        let n = if k % 3 == 0 { 2 } else { 1 };
        let new = lease(&format!("l{k}"), "p", k % 6, k % 6 + 3, vec![hosts(n, n, json!([]))]);
        tasks.push(tokio::spawn(async move { store.create_lease(&meta(), new).await }));
    }
    let made = count_made(tasks).await;
    // Hours [0, 9): each host held once at each instant.
    for id in &ids {
        assert!(peak_vcpus(&store, *id, 0, 9).await <= 8);
    }
    // Six hosts over nine hours hold at most eighteen three-hour slots; a
    // host left empty would have taken any of the refused.
    assert!((3..=18).contains(&made), "made {made}");
    assert_replay_clean(&store).await;
}

/// How many of the creations `tasks` made a lease; any other answer than a
/// refusal for capacity fails the test.
async fn count_made(
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<berth_store::queries::leases::Lease>, berth_core::Error>>>,
) -> usize {
    let mut made = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => made += 1,
            Err(e) => assert_eq!(e.kind, ErrorKind::Capacity, "{e:?}"),
        }
    }
    made
}
