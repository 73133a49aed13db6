//! Invariant 3: a consumer's allocations change all together or not at all:
//! a move, a resize and a reshape are single transactions.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::BTreeMap;

use berth_core::error::ErrorKind;
use berth_core::{Inventory, Window};
use berth_store::commands::{GenerationCheck, NewProvider, ReshapeInventory};
use berth_store::queries::AllocationRow;
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::Utc;
use common::*;
use tokio_postgres::NoTls;
use uuid::Uuid;

/// Makes the database fail in the middle of a command's writes: any
/// allocation inserted for `consumer` on `provider` raises, after the
/// command has already appended events and deleted the consumer's old rows.
async fn sabotage(url: &str, provider: Uuid) {
    let (c, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute(&format!(
        "CREATE FUNCTION sabotage() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.provider_uuid = '{provider}' THEN RAISE EXCEPTION 'injected failure'; END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER sabotage BEFORE INSERT ON allocations FOR EACH ROW EXECUTE FUNCTION sabotage();"
    ))
    .await
    .unwrap();
}

async fn snapshot(store: &Store, consumer: Uuid, providers: &[Uuid]) -> (Vec<AllocationRow>, Option<i64>, Vec<i64>) {
    let rows = store.consumer_allocations(consumer).await.unwrap();
    let gen = store.consumer(consumer).await.unwrap().map(|c| c.generation);
    let mut gens = Vec::new();
    for p in providers {
        gens.push(store.provider(*p).await.unwrap().generation);
    }
    (rows, gen, gens)
}

#[tokio::test]
async fn a_move_that_fails_midway_leaves_the_consumer_where_it_was() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let a = provider(&store, "a", &[("VCPU", 8), ("MEMORY_MB", 1024)]).await;
    let b = provider(&store, "b", &[("VCPU", 8), ("MEMORY_MB", 1024)]).await;
    let c = provider(&store, "c", &[("VCPU", 8), ("MEMORY_MB", 1024)]).await;
    let id = Uuid::new_v4();
    let now = Window::from(Utc::now());
    let on = |p| vec![hold(p, "VCPU", 2, now), hold(p, "MEMORY_MB", 512, now)];
    store.replace_allocations(&meta(), vec![consumer(id, GenerationCheck::New, on(a))]).await.unwrap();
    let before = snapshot(&store, id, &[a, b, c]).await;
    let log_before = log_length(&db.url).await;

    // Refused by a rule: MEMORY on b fits but VCPU on b does not.
    let too_big = vec![hold(b, "VCPU", 9, now), hold(b, "MEMORY_MB", 512, now)];
    let gen = before.1.unwrap();
    let err = store.replace_allocations(&meta(), vec![consumer(id, GenerationCheck::Exactly(gen), too_big)]).await;
    assert_eq!(err.unwrap_err().kind, ErrorKind::Capacity);
    assert_eq!(snapshot(&store, id, &[a, b, c]).await, before);

    // Broken by the database after the old rows were deleted and events appended.
    sabotage(&db.url, c).await;
    let err = store.replace_allocations(&meta(), vec![consumer(id, GenerationCheck::Exactly(gen), on(c))]).await;
    assert_eq!(err.unwrap_err().kind, ErrorKind::Internal);
    assert_eq!(snapshot(&store, id, &[a, b, c]).await, before);
    assert_eq!(log_length(&db.url).await, log_before, "no event of a failed command stays in the log");

    // A move that works moves everything at once.
    store.replace_allocations(&meta(), vec![consumer(id, GenerationCheck::Exactly(gen), on(b))]).await.unwrap();
    let rows = store.consumer_allocations(id).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.provider == b));
    assert!(store.provider_allocations(a, None).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_resize_is_all_or_nothing_and_counts_only_the_change() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let a = provider(&store, "a", &[("VCPU", 4), ("MEMORY_MB", 1024)]).await;
    let id = Uuid::new_v4();
    let now = Window::from(Utc::now());
    store
        .replace_allocations(
            &meta(),
            vec![consumer(id, GenerationCheck::New, vec![hold(a, "VCPU", 3, now), hold(a, "MEMORY_MB", 512, now)])],
        )
        .await
        .unwrap();
    let before = snapshot(&store, id, &[a]).await;
    // 4 VCPU would not fit on top of the old 3, but a resize replaces them.
    let grow_cpu = vec![hold(a, "VCPU", 4, now), hold(a, "MEMORY_MB", 2048, now)];
    let err = store.replace_allocations(&meta(), vec![consumer(id, GenerationCheck::Any, grow_cpu)]).await;
    assert_eq!(err.unwrap_err().kind, ErrorKind::Capacity, "memory does not fit, so nothing changes");
    assert_eq!(snapshot(&store, id, &[a]).await, before);
    let grow_cpu = vec![hold(a, "VCPU", 4, now), hold(a, "MEMORY_MB", 1024, now)];
    store.replace_allocations(&meta(), vec![consumer(id, GenerationCheck::Any, grow_cpu)]).await.unwrap();
    let used: i64 = store
        .consumer_allocations(id)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.resource_class == "VCPU")
        .map(|r| r.used)
        .sum();
    assert_eq!(used, 4);
}

#[tokio::test]
async fn a_reshape_moves_inventory_and_allocations_together_or_not_at_all() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let m = meta();
    let root = provider(&store, "compute", &[("VCPU", 8), ("VGPU", 4)]).await;
    let gpu1 =
        store.create_provider(&m, NewProvider { uuid: None, name: "gpu1".into(), parent: Some(root) }).await.unwrap();
    let gpu2 =
        store.create_provider(&m, NewProvider { uuid: None, name: "gpu2".into(), parent: Some(root) }).await.unwrap();
    let id = Uuid::new_v4();
    let now = Window::from(Utc::now());
    store
        .replace_allocations(
            &m,
            vec![consumer(id, GenerationCheck::New, vec![hold(root, "VCPU", 2, now), hold(root, "VGPU", 2, now)])],
        )
        .await
        .unwrap();
    // Deleting the VGPU inventory alone is refused: it is in use.
    let err = store
        .replace_inventories(
            &m,
            root,
            None,
            BTreeMap::from([("VCPU".into(), Inventory { total: 8, ..Default::default() })]),
        )
        .await;
    assert_eq!(err.unwrap_err().kind, ErrorKind::InUse);

    let gens = |store: Store| async move {
        let mut g = Vec::new();
        for p in [root, gpu1, gpu2] {
            g.push(store.provider(p).await.unwrap().generation);
        }
        g
    };
    let g = gens(store.clone()).await;
    let reshape = |g: &[i64], gpu2_gen: i64| {
        vec![
            ReshapeInventory {
                provider: root,
                expected_generation: g[0],
                inventories: BTreeMap::from([("VCPU".into(), Inventory { total: 8, ..Default::default() })]),
            },
            ReshapeInventory {
                provider: gpu1,
                expected_generation: g[1],
                inventories: BTreeMap::from([("VGPU".into(), Inventory { total: 2, ..Default::default() })]),
            },
            ReshapeInventory {
                provider: gpu2,
                expected_generation: gpu2_gen,
                inventories: BTreeMap::from([("VGPU".into(), Inventory { total: 2, ..Default::default() })]),
            },
        ]
    };
    let moved = vec![consumer(id, GenerationCheck::Any, vec![hold(root, "VCPU", 2, now), hold(gpu1, "VGPU", 2, now)])];
    let before = (snapshot(&store, id, &[root, gpu1, gpu2]).await, store.inventories(root).await.unwrap());

    // A stale generation on the last provider: nothing of the reshape happens.
    let err = store.reshape(&m, reshape(&g, g[2] + 7), moved.clone()).await;
    assert_eq!(err.unwrap_err().kind, ErrorKind::Conflict);
    assert_eq!((snapshot(&store, id, &[root, gpu1, gpu2]).await, store.inventories(root).await.unwrap()), before);

    // A database failure midway (inserting the moved allocation): nothing either.
    sabotage(&db.url, gpu1).await;
    let err = store.reshape(&m, reshape(&g, g[2]), moved.clone()).await;
    assert_eq!(err.unwrap_err().kind, ErrorKind::Internal);
    assert_eq!((snapshot(&store, id, &[root, gpu1, gpu2]).await, store.inventories(root).await.unwrap()), before);
    assert!(store.inventories(gpu1).await.unwrap().is_empty());

    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute("DROP TRIGGER sabotage ON allocations").await.unwrap();
    store.reshape(&m, reshape(&g, g[2]), moved).await.unwrap();
    assert!(!store.inventories(root).await.unwrap().contains_key("VGPU"));
    assert_eq!(store.inventories(gpu1).await.unwrap()["VGPU"].total, 2);
    let rows = store.consumer_allocations(id).await.unwrap();
    assert!(rows.iter().any(|r| r.provider == gpu1 && r.resource_class == "VGPU" && r.used == 2));
    assert!(store.replay_verify().await.unwrap().is_clean());
}

/// Waits until no session of the test database but `watcher`'s is idle in
/// a transaction.
async fn no_transaction_left_open(watcher: &tokio_postgres::Client) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let open: i64 = watcher
            .query_one(
                "SELECT count(*) AS open FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'",
                &[],
            )
            .await
            .unwrap()
            .get("open");
        if open == 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "a pooled connection was left in a transaction");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A command whose caller goes away mid-transaction (its future dropped, as
/// when an HTTP client disconnects) leaves no transaction open on the pooled
/// connection: it is rolled back, and the next command on that connection
/// runs in a transaction of its own.
#[tokio::test]
async fn a_command_dropped_midway_leaves_no_transaction_open() {
    let db = TestDatabase::new().await;
    let store = db.store(1);
    let p = provider(&store, "p", &[("VCPU", 8)]).await;
    let now = Window::from(Utc::now());
    let meta = meta();
    let held = Uuid::new_v4();
    store
        .replace_allocations(&meta, vec![consumer(held, GenerationCheck::New, vec![hold(p, "VCPU", 1, now)])])
        .await
        .unwrap();
    // Another session holds the consumer, so the delete waits on its lock inside its transaction.
    let (blocker, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    blocker.batch_execute(&format!("BEGIN; SELECT 1 FROM consumers WHERE uuid = '{held}' FOR UPDATE")).await.unwrap();
    let delete = store.delete_allocations(&meta, held);
    assert!(tokio::time::timeout(std::time::Duration::from_millis(500), delete).await.is_err(), "it waited");
    blocker.batch_execute("ROLLBACK").await.unwrap();
    // The dropped command's transaction ends once the server gets past its lock wait.
    no_transaction_left_open(&blocker).await;
    // Nothing of the dropped delete stands; the next command on the one pooled connection commits alone.
    assert!(store.consumer(held).await.unwrap().is_some(), "the dropped delete was rolled back");
    let next = Uuid::new_v4();
    store
        .replace_allocations(&meta, vec![consumer(next, GenerationCheck::New, vec![hold(p, "VCPU", 1, now)])])
        .await
        .unwrap();
    let seen: i64 = blocker
        .query_one("SELECT count(*) AS seen FROM consumers WHERE uuid = $1", &[&next])
        .await
        .unwrap()
        .get("seen");
    assert_eq!(seen, 1, "committed, visible to another session");
}

/// Claims are decided together in batches (commands::claims): a claim
/// whose caller goes away is still decided, and neither it nor the others
/// of its batch are cut short. Each of many concurrent claims gets its own
/// answer and its own log event, and a refused one writes nothing.
#[tokio::test]
async fn claims_decided_together_each_get_their_own_answer() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let p = provider(&store, "p", &[("VCPU", 8)]).await;
    let now = Window::from(Utc::now());
    let meta = meta();
    // Another session holds the provider: every claim queues up behind it.
    let (blocker, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    blocker.batch_execute(&format!("BEGIN; SELECT 1 FROM providers WHERE uuid = '{p}' FOR UPDATE")).await.unwrap();
    let log_before = log_length(&db.url).await;
    let dropped = Uuid::new_v4();
    let claim =
        store.replace_allocations(&meta, vec![consumer(dropped, GenerationCheck::New, vec![hold(p, "VCPU", 1, now)])]);
    assert!(tokio::time::timeout(std::time::Duration::from_millis(300), claim).await.is_err(), "it waited");
    // Twelve more, two VCPU each: with the dropped one's, room for three of them.
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (store, meta) = (store.clone(), meta.clone());
        tasks.push(tokio::spawn(async move {
            let c = Uuid::new_v4();
            let r = store
                .replace_allocations(&meta, vec![consumer(c, GenerationCheck::New, vec![hold(p, "VCPU", 2, now)])])
                .await;
            (c, r)
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    blocker.batch_execute("ROLLBACK").await.unwrap();
    let mut granted = Vec::new();
    for t in tasks {
        let (c, r) = t.await.unwrap();
        match r {
            Ok(()) => granted.push(c),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Capacity, "{e:?}");
                assert!(store.consumer(c).await.unwrap().is_none(), "a refused claim wrote nothing");
            }
        }
    }
    assert_eq!(granted.len(), 3, "1 + 3 x 2 of 8 VCPU, and no more");
    no_transaction_left_open(&blocker).await;
    assert!(store.consumer(dropped).await.unwrap().is_some(), "the claim whose caller left was still decided");
    assert_eq!(log_length(&db.url).await - log_before, 4, "one event per claim written");
    let usage: i64 = blocker
        .query_one("SELECT coalesce(sum(used), 0)::int8 AS used FROM allocations WHERE provider_uuid = $1", &[&p])
        .await
        .unwrap()
        .get("used");
    assert_eq!(usage, 7);
    // The batch's events, replayed one by one, give what it wrote all at once.
    assert!(store.replay_verify().await.unwrap().is_clean());
}

/// A batch of claims decides at the instant its transaction starts (the
/// pipeline that sends its `BEGIN` reads it, `clock::STARTED`): after the
/// claim was made, and before the batch waited for the locks it needed.
/// The consumer carries that instant.
#[tokio::test]
async fn a_batch_decides_at_its_start_before_its_lock_waits() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let p = provider(&store, "p", &[("VCPU", 8)]).await;
    let (watcher, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let clock = "SELECT statement_timestamp()";
    let before: chrono::DateTime<Utc> = watcher.query_one(clock, &[]).await.unwrap().get(0);
    watcher.batch_execute(&format!("BEGIN; SELECT 1 FROM providers WHERE uuid = '{p}' FOR UPDATE")).await.unwrap();
    let id = Uuid::new_v4();
    let now = Window::from(store.now().await.unwrap());
    let claim = {
        let store = store.clone();
        let c = vec![consumer(id, GenerationCheck::New, vec![hold(p, "VCPU", 1, now)])];
        tokio::spawn(async move { store.replace_allocations(&meta(), c).await })
    };
    // Seen from outside the locker's transaction, which keeps the picture
    // of the server's activity it took at its first look.
    let (outside, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let waits = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let mut tries = 0;
    while outside.query_one(waits, &[]).await.unwrap().get::<_, i64>(0) == 0 {
        tries += 1;
        assert!(tries < 3000, "the batch never came to wait for the provider's lock");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let waiting: chrono::DateTime<Utc> = watcher.query_one(clock, &[]).await.unwrap().get(0);
    watcher.batch_execute("ROLLBACK").await.unwrap();
    claim.await.unwrap().unwrap();
    let at: chrono::DateTime<Utc> =
        watcher.query_one("SELECT created_at FROM consumers WHERE uuid = $1", &[&id]).await.unwrap().get(0);
    assert!(before <= at && at <= waiting, "{before} <= {at} <= {waiting}");
}

/// A reshape naming a resource class that does not exist, in an inventory
/// rather than an allocation, is refused as such (Placement's 400), before
/// anything about the classes it drops, and writes nothing.
#[tokio::test]
async fn a_reshape_naming_an_unknown_class_in_an_inventory_is_refused() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let m = meta();
    let p = provider(&store, "compute", &[("DISK_GB", 100)]).await;
    let id = Uuid::new_v4();
    let now = Window::from(Utc::now());
    store
        .replace_allocations(&m, vec![consumer(id, GenerationCheck::New, vec![hold(p, "DISK_GB", 10, now)])])
        .await
        .unwrap();
    let generation = store.provider(p).await.unwrap().generation;
    let before = log_length(&db.url).await;
    let err = store
        .reshape(
            &m,
            vec![ReshapeInventory {
                provider: p,
                expected_generation: generation,
                inventories: BTreeMap::from([("DISK_OF_STEEL".into(), Inventory { total: 100, ..Default::default() })]),
            }],
            vec![consumer(id, GenerationCheck::Any, vec![hold(p, "DISK_GB", 10, now)])],
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.code),
        (ErrorKind::Invalid, berth_core::error::ErrorCode::ResourceClassNotFound),
        "{err:?}"
    );
    assert_eq!(log_length(&db.url).await, before);
}
