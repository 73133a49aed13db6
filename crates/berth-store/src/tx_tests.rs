//! The pipelined transaction (`tx::Pipelined`): `BEGIN` and `COMMIT` sent
//! with statements, and still all or nothing; its connection clean for the
//! next user of the pool whatever became of it; `pipelined!` retried as
//! `command!` is.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::NoTls;

use crate::testing::TestDatabase;
use crate::tx::Pipelined;

const INSERT: &str = "INSERT INTO tx_test (n) VALUES ($1)";
/// Fails when it runs, not when prepared: a division by zero for 0.
const FAIL: &str = "SELECT 1 / $1::int4";
/// Fails with the SQLSTATE it is given.
const RAISE: &str = "SELECT tx_test_raise($1)";
/// Writes a row, and so holds it until the transaction ends.
const TOUCH: &str = "UPDATE tx_test SET n = n WHERE n = $1";

/// A test database with the table the tests write, and a session of the
/// test's own to look at it.
async fn setup() -> (TestDatabase, tokio_postgres::Client) {
    let db = TestDatabase::new().await;
    let (watcher, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    watcher
        .batch_execute(
            "CREATE TABLE tx_test (n int4 PRIMARY KEY);
             CREATE FUNCTION tx_test_raise(code text) RETURNS int4 LANGUAGE plpgsql
                 AS $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = code; END $$;",
        )
        .await
        .unwrap();
    (db, watcher)
}

/// What is committed, as another session sees it.
async fn committed(watcher: &tokio_postgres::Client) -> Vec<i32> {
    watcher.query("SELECT n FROM tx_test ORDER BY n", &[]).await.unwrap().iter().map(|r| r.get("n")).collect()
}

/// Waits until no session but `watcher`'s is in a transaction: the server
/// has run the ROLLBACK a dropped transaction sent without waiting.
async fn no_transaction_left_open(watcher: &tokio_postgres::Client) {
    for _ in 0..1500 {
        let open: i64 = watcher
            .query_one(
                "SELECT count(*) AS open FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get("open");
        if open == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a transaction was left open on a pooled connection");
}

/// A statement failing in the pipeline that carries the COMMIT leaves
/// nothing of the transaction, before it or in that pipeline; so does a
/// statement that failed earlier even when the caller went on to commit
/// (PostgreSQL answers such a COMMIT with a ROLLBACK, not an error), and a
/// parameter that cannot be sent.
#[tokio::test]
async fn a_failing_statement_in_the_commit_pipeline_commits_nothing() {
    let (db, watcher) = setup().await;
    let store = db.store(1);
    let client = store.client().await.unwrap();
    let tx = Pipelined::new(&client);
    tx.pipeline([(INSERT, &[&1i32])]).await.unwrap();
    let e = tx.commit_with([(INSERT, &[&2i32]), (FAIL, &[&0i32]), (INSERT, &[&3i32])]).await.unwrap_err();
    assert_eq!(e.sqlstate(), Some("22012"), "the cause, not the aborted transaction after it: {e}");
    drop(tx);
    no_transaction_left_open(&watcher).await;
    assert_eq!(committed(&watcher).await, Vec::<i32>::new());

    let tx = Pipelined::new(&client);
    tx.pipeline([(INSERT, &[&1i32])]).await.unwrap();
    assert!(tx.pipeline([(FAIL, &[&0i32])]).await.is_err());
    let e = tx.commit().await.unwrap_err();
    assert_eq!(e.sqlstate(), Some("25P02"), "a COMMIT of an aborted transaction is not taken for one: {e}");
    let e = tx.commit_with([(INSERT, &[&2i32])]).await.unwrap_err();
    assert_eq!(e.sqlstate(), Some("25P02"), "{e}");
    drop(tx);
    no_transaction_left_open(&watcher).await;
    assert_eq!(committed(&watcher).await, Vec::<i32>::new());

    // A text for an int4 fails before it is sent: the others are, the COMMIT is not.
    let tx = Pipelined::new(&client);
    tx.pipeline([(INSERT, &[&1i32])]).await.unwrap();
    assert!(tx.commit_with([(INSERT, &[&"two"]), (INSERT, &[&3i32])]).await.is_err());
    drop(tx);
    no_transaction_left_open(&watcher).await;
    assert_eq!(committed(&watcher).await, Vec::<i32>::new());

    // One that works commits all of it at once, in two round trips.
    let tx = Pipelined::new(&client);
    let [started, _] = tx.pipeline([(crate::clock::STARTED, &[]), (INSERT, &[&1i32])]).await.unwrap();
    let [_, inserted] =
        tx.commit_with([(INSERT, &[&2i32]), ("SELECT transaction_timestamp() AS started", &[])]).await.unwrap();
    let (a, b): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        (started[0].get("started"), inserted[0].get("started"));
    assert_eq!(a, b, "one transaction, begun with the first pipeline");
    assert_eq!(committed(&watcher).await, [1, 2]);
    assert!(tx.pipeline([(INSERT, &[&3i32])]).await.is_err(), "nothing is sent after the commit");
    drop(tx);
    assert_eq!(committed(&watcher).await, [1, 2]);
}

/// The one connection of a pool, after a transaction on it failed, was
/// dropped open, or was dropped while a statement waited on a lock, runs the
/// next user's statements outside any transaction of the earlier one.
#[tokio::test]
async fn a_connection_whose_transaction_failed_is_clean_for_the_next_user() {
    let (db, watcher) = setup().await;
    let store = db.store(1);
    let next_user_writes = |n: i32| {
        let store = store.clone();
        async move {
            let client = store.client().await.unwrap();
            client.execute(INSERT, &[&n]).await.unwrap();
        }
    };
    {
        let client = store.client().await.unwrap();
        let tx = Pipelined::new(&client);
        tx.pipeline([(INSERT, &[&1i32])]).await.unwrap();
        assert!(tx.commit_with([(FAIL, &[&0i32])]).await.is_err());
    }
    next_user_writes(10).await;
    assert_eq!(committed(&watcher).await, [10], "the next user's write committed alone");
    {
        let client = store.client().await.unwrap();
        let tx = Pipelined::new(&client);
        tx.pipeline([(INSERT, &[&2i32])]).await.unwrap();
    }
    next_user_writes(20).await;
    assert_eq!(committed(&watcher).await, [10, 20], "a transaction dropped open is rolled back");

    // Dropped while its statement waits for a row another session holds.
    watcher.batch_execute("BEGIN; UPDATE tx_test SET n = n WHERE n = 10").await.unwrap();
    {
        let client = store.client().await.unwrap();
        let tx = Pipelined::new(&client);
        let waiting = tx.pipeline([(INSERT, &[&3i32]), (TOUCH, &[&10i32])]);
        assert!(tokio::time::timeout(Duration::from_millis(300), waiting).await.is_err(), "it waited");
    }
    watcher.batch_execute("ROLLBACK").await.unwrap();
    no_transaction_left_open(&watcher).await;
    next_user_writes(30).await;
    assert_eq!(committed(&watcher).await, [10, 20, 30]);
    no_transaction_left_open(&watcher).await;
}

/// A transient failure (here a serialization failure, raised in the
/// pipeline that carries the COMMIT) starts the block over in a clean
/// transaction: nothing of the failed attempt stays.
#[tokio::test]
async fn a_serialization_failure_in_the_commit_pipeline_is_retried() {
    let (db, watcher) = setup().await;
    let store = db.store(2);
    let attempts = AtomicUsize::new(0);
    let out = crate::tx::pipelined!(store, |tx| {
        let attempt = attempts.fetch_add(1, Ordering::SeqCst);
        tx.pipeline([(INSERT, &[&1i32])]).await?;
        if attempt == 0 {
            tx.commit_with([(INSERT, &[&2i32]), (RAISE, &[&"40001"])]).await?;
        } else {
            tx.commit_with([(INSERT, &[&2i32])]).await?;
        }
        Ok(attempt)
    });
    assert_eq!(out.unwrap(), 1, "the second attempt answered");
    assert_eq!(committed(&watcher).await, [1, 2]);
    // A failure that is not transient is not retried.
    let attempts = AtomicUsize::new(0);
    let out = crate::tx::pipelined!(store, |tx| {
        attempts.fetch_add(1, Ordering::SeqCst);
        tx.commit_with([(INSERT, &[&3i32]), (RAISE, &[&"22012"])]).await?;
        Ok(())
    });
    assert!(out.is_err());
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(committed(&watcher).await, [1, 2]);
}

/// Two transactions taking two rows in opposite orders deadlock; the one
/// the server aborts starts over once the other has committed, and both
/// writes stand, once each.
#[tokio::test]
async fn a_deadlock_is_retried() {
    let (db, watcher) = setup().await;
    watcher.batch_execute("INSERT INTO tx_test VALUES (1), (2)").await.unwrap();
    let store = db.store(2);
    let both_hold_one = Arc::new(tokio::sync::Barrier::new(2));
    let tries = Arc::new(AtomicUsize::new(0));
    let run = |first: i32, second: i32| {
        let (store, both_hold_one, tries) = (store.clone(), both_hold_one.clone(), tries.clone());
        tokio::spawn(async move {
            let attempts = AtomicUsize::new(0);
            let out = crate::tx::pipelined!(store, |tx| {
                let attempt = attempts.fetch_add(1, Ordering::SeqCst);
                tries.fetch_add(1, Ordering::SeqCst);
                tx.pipeline([(TOUCH, &[&first])]).await?;
                if attempt == 0 {
                    both_hold_one.wait().await;
                }
                tx.commit_with([(TOUCH, &[&second]), (INSERT, &[&(first * 10)])]).await?;
                Ok(())
            });
            out
        })
    };
    let (a, b) = (run(1, 2), run(2, 1));
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
    // One started over, or on a loaded machine both: each backend checks
    // for the deadlock after deadlock_timeout, and the second check can
    // run before the first victim has let go. Each write stands once.
    assert!(tries.load(Ordering::SeqCst) >= 3, "one of the two started over");
    assert_eq!(committed(&watcher).await, [1, 2, 10, 20]);
}
