//! The deadline of a use of a connection (`conn`): a statement the server
//! does not answer in time fails at the deadline, its connection is dropped
//! for a fresh one, and a command says whether its write may have been made.

use std::time::{Duration, Instant};

use berth_core::error::{ErrorCode, ErrorKind};
use tokio_postgres::NoTls;

use crate::testing::TestDatabase;
use crate::{PoolSettings, Store, StoreError};

/// The server stops a statement at this, Berth waits a second more.
const STATEMENT_TIMEOUT: Duration = Duration::from_millis(500);
/// Longer than the deadline, and than any wait it may be late by.
const LATE: Duration = Duration::from_secs(4);

/// A store of one connection under the statement timeout, and a session
/// of the test's own with a table to write and a COMMIT that takes 3 s
/// (a deferred trigger that sleeps): the server's answer to it comes after
/// the deadline, whatever the statement timeout says.
async fn setup() -> (TestDatabase, Store, tokio_postgres::Client) {
    let db = TestDatabase::new().await;
    let settings = PoolSettings { max_size: 1, statement_timeout: Some(STATEMENT_TIMEOUT), ..PoolSettings::default() };
    let store = Store::connect_with(&db.url, &settings).unwrap();
    let (watcher, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    watcher
        .batch_execute(
            "CREATE TABLE conn_test (n int4 PRIMARY KEY);
             CREATE FUNCTION conn_test_slow() RETURNS trigger LANGUAGE plpgsql
                 AS $$ BEGIN PERFORM pg_sleep(3); RETURN NULL; END $$;
             CREATE CONSTRAINT TRIGGER conn_test_slow AFTER INSERT ON conn_test
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION conn_test_slow();",
        )
        .await
        .unwrap();
    (db, store, watcher)
}

#[tokio::test]
async fn a_statement_unanswered_by_the_deadline_fails_then_and_its_connection_is_replaced() {
    let (_db, store, _) = setup().await;
    let c = store.client().await.unwrap();
    // Off for this session: the server would stop the sleep itself.
    c.batch_execute("SET statement_timeout = 0").await.unwrap();
    let started = Instant::now();
    let e = c.batch_execute("SELECT pg_sleep(3)").await.unwrap_err();
    assert!(started.elapsed() < LATE, "{:?}", started.elapsed());
    assert!(c.lapsed() && c.is_closed(), "{e}");
    assert!(matches!(StoreError::from(e).lapsed_if(c.lapsed()), StoreError::Lapsed(_)));
    drop(c);
    let c = store.client().await.unwrap();
    assert!(!c.lapsed(), "a fresh connection");
    c.batch_execute("SELECT 1").await.unwrap();
}

#[tokio::test]
async fn a_connection_in_use_for_less_than_the_deadline_each_time_is_kept() {
    let (_db, store, _) = setup().await;
    // Three uses, each well within the deadline, longer than it together.
    for _ in 0..3 {
        let c = store.client().await.unwrap();
        c.batch_execute("SELECT pg_sleep(0.3)").await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!c.lapsed());
    }
    // Nor does an idle one in the pool lapse.
    tokio::time::sleep(STATEMENT_TIMEOUT * 4).await;
    let c = store.client().await.unwrap();
    c.batch_execute("SELECT 1").await.unwrap();
    assert!(!c.lapsed());
}

#[tokio::test]
async fn a_command_whose_commit_goes_unanswered_says_its_outcome_is_unknown() {
    let (_db, store, watcher) = setup().await;
    let started = Instant::now();
    let e = crate::tx::command!(store, |tx| {
        tx.batch_execute("SET LOCAL statement_timeout = 0; INSERT INTO conn_test VALUES (1)").await?;
        Ok(())
    })
    .unwrap_err();
    assert!(started.elapsed() < LATE, "{:?}", started.elapsed());
    assert_eq!((e.kind, e.code), (ErrorKind::Unavailable, ErrorCode::OutcomeUnknown), "{e}");
    // The server goes on and commits: the outcome was unknown indeed.
    let mut n = 0;
    for _ in 0..100 {
        n = watcher.query_one("SELECT count(*) AS n FROM conn_test", &[]).await.unwrap().get::<_, i64>("n");
        if n == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(n, 1, "the first COMMIT took effect");

    let e = crate::tx::pipelined!(store, |tx| {
        tx.client().await?.batch_execute("SET LOCAL statement_timeout = 0").await?;
        tx.commit_with([("INSERT INTO conn_test VALUES (2)", &[])]).await?;
        Ok(())
    })
    .unwrap_err();
    assert_eq!((e.kind, e.code), (ErrorKind::Unavailable, ErrorCode::OutcomeUnknown), "{e}");
}

#[tokio::test]
async fn a_command_stopped_by_the_deadline_before_its_commit_wrote_nothing() {
    let (_db, store, watcher) = setup().await;
    let started = Instant::now();
    let e = crate::tx::command!(store, |tx| {
        tx.batch_execute("SET LOCAL statement_timeout = 0").await?;
        tx.batch_execute("INSERT INTO conn_test VALUES (1); SELECT pg_sleep(3)").await?;
        Ok(())
    })
    .unwrap_err();
    assert!(started.elapsed() < LATE, "{:?}", started.elapsed());
    assert_eq!((e.kind, e.code), (ErrorKind::Unavailable, ErrorCode::Unavailable), "{e}");
    assert!(e.detail.contains("deadline"), "{e}");
    let n: i64 = watcher.query_one("SELECT count(*) AS n FROM conn_test", &[]).await.unwrap().get("n");
    assert_eq!(n, 0);
}
