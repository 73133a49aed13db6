//! Invariant 5: a log reader with a cursor never skips an event, even when
//! transactions commit out of position order.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use berth_core::error::ErrorCode;
use berth_core::{Event, EventMeta};
use berth_store::log::{self, Cursor};
use berth_store::testing::{self, TestDatabase};
use tokio_postgres::NoTls;

fn trait_created(name: String) -> Event {
    Event::TraitCreated { name }
}

async fn raw(url: &str) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}

async fn all_positions(url: &str) -> Vec<i64> {
    let c = raw(url).await;
    c.query("SELECT position FROM log_events ORDER BY position", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get("position"))
        .collect()
}

/// Reads everything after `cursor` that is readable now.
async fn drain(c: &tokio_postgres::Client, cursor: &mut Cursor, seen: &mut Vec<i64>) {
    loop {
        let page = log::read_after(c, *cursor, 100).await.unwrap();
        if page.is_empty() {
            return;
        }
        for e in page {
            assert!(e.cursor() > *cursor, "cursor went backwards: {} after {}", e.cursor(), cursor);
            *cursor = e.cursor();
            seen.push(e.position);
        }
    }
}

/// Reads until `want` events have been seen in all. Other transactions
/// anywhere on the server (other tests) hold the visibility horizon back for
/// a moment, so a reader polls, as a real one does; 20 s is a hang, not a pace.
async fn drain_until(c: &tokio_postgres::Client, cursor: &mut Cursor, seen: &mut Vec<i64>, want: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while seen.len() < want && std::time::Instant::now() < deadline {
        drain(c, cursor, seen).await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_later_position_committed_first_is_not_read_before_the_earlier_one() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let (mut a, mut b) = (testing::connection(&store).await, testing::connection(&store).await);
    let reader = raw(&db.url).await;
    let meta = EventMeta::default();

    // A takes the lower position, B the higher; B commits first.
    let ta = a.transaction().await.unwrap();
    let pa = testing::append(&ta, &meta, &[trait_created("CUSTOM_A".into())]).await.unwrap()[0];
    let tb = b.transaction().await.unwrap();
    let pb = testing::append(&tb, &meta, &[trait_created("CUSTOM_B".into())]).await.unwrap()[0];
    assert!(pa < pb);
    tb.commit().await.unwrap();

    let (mut cursor, mut seen) = (Cursor::START, Vec::new());
    drain(&reader, &mut cursor, &mut seen).await;
    assert!(seen.is_empty(), "B must wait until A, still open below it, is decided: saw {seen:?}");
    ta.commit().await.unwrap();
    drain_until(&reader, &mut cursor, &mut seen, 2).await;
    drain(&reader, &mut cursor, &mut seen).await;
    assert_eq!(seen, vec![pa, pb]);
}

#[tokio::test]
async fn an_older_transaction_with_a_higher_position_does_not_hide_a_lower_one() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let (mut a, mut b) = (testing::connection(&store).await, testing::connection(&store).await);
    let reader = raw(&db.url).await;
    let meta = EventMeta::default();

    // A gets its transaction id first; B takes the lower position; A commits first.
    let ta = a.transaction().await.unwrap();
    ta.query_one("SELECT pg_current_xact_id()", &[]).await.unwrap();
    let tb = b.transaction().await.unwrap();
    let pb = testing::append(&tb, &meta, &[trait_created("CUSTOM_B".into())]).await.unwrap()[0];
    let pa = testing::append(&ta, &meta, &[trait_created("CUSTOM_A".into())]).await.unwrap()[0];
    assert!(pb < pa);
    ta.commit().await.unwrap();

    let (mut cursor, mut seen) = (Cursor::START, Vec::new());
    drain_until(&reader, &mut cursor, &mut seen, 1).await;
    assert_eq!(seen, vec![pa]);
    // A reader keyed on the highest position seen would now stand at pa > pb
    // and never see B. This one does.
    tb.commit().await.unwrap();
    drain_until(&reader, &mut cursor, &mut seen, 2).await;
    drain(&reader, &mut cursor, &mut seen).await;
    assert_eq!(seen, vec![pa, pb]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reader_following_eight_writers_sees_every_event_exactly_once() {
    let db = TestDatabase::new().await;
    let store = db.store(10);
    let done = Arc::new(AtomicBool::new(false));
    let reader_url = db.url.clone();
    let reader_done = done.clone();
    const TOTAL: usize = 8 * (20 * (1 + 2 + 3));
    let reader = tokio::spawn(async move {
        let c = raw(&reader_url).await;
        let (mut cursor, mut seen) = (Cursor::START, Vec::new());
        while !reader_done.load(Ordering::SeqCst) {
            drain(&c, &mut cursor, &mut seen).await;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        // The writers are done: keep following until everything has shown up
        // (or long enough to call it lost), then once more for duplicates.
        drain_until(&c, &mut cursor, &mut seen, TOTAL).await;
        drain(&c, &mut cursor, &mut seen).await;
        seen
    });
    let mut writers = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..60 {
                // One to three events per transaction.
                let events: Vec<Event> =
                    (0..(i % 3 + 1)).map(|k| trait_created(format!("CUSTOM_W{w}_{i}_{k}"))).collect();
                store.append(&EventMeta::default(), &events, None).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let seen = reader.await.unwrap();
    let all = all_positions(&db.url).await;
    assert_eq!(all.len(), TOTAL);
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "an event was read twice");
    assert_eq!(unique.into_iter().collect::<Vec<_>>(), all, "an event was skipped");
}

#[tokio::test]
async fn appending_at_a_stale_stream_version_fails() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let e = || vec![trait_created("CUSTOM_X".into())];
    store.append(&EventMeta::default(), &e(), Some(0)).await.unwrap();
    let err = store.append(&EventMeta::default(), &e(), Some(0)).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::StreamVersion);
    // Nothing of the refused append was written or applied.
    assert_eq!(all_positions(&db.url).await.len(), 1);
    let c = raw(&db.url).await;
    let versions: Vec<i64> = c
        .query("SELECT version FROM log_events WHERE stream = 'trait:CUSTOM_X'", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get("version"))
        .collect();
    assert_eq!(versions, vec![1]);
}

#[tokio::test]
async fn the_log_refuses_updates_and_deletes() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    store.append(&EventMeta::default(), &[trait_created("CUSTOM_Y".into())], None).await.unwrap();
    let c = raw(&db.url).await;
    assert!(c.execute("UPDATE log_events SET type = 'x'", &[]).await.is_err());
    assert!(c.execute("DELETE FROM log_events", &[]).await.is_err());
}

/// A cursor at the end "now" names the last transaction that wrote to the
/// log, never a transaction id above it: ids spent since by transactions
/// that rolled back or wrote nothing may never reach a standby, which then
/// hands them out again once promoted, and events under such ids would
/// sort below the cursor (`make test-ha` reads on across a failover).
#[tokio::test]
async fn the_cursor_at_the_end_names_the_last_transaction_that_wrote() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    store.append(&EventMeta::default(), &[trait_created("CUSTOM_LAST".into())], None).await.unwrap();
    let c = raw(&db.url).await;
    let mut cursor = Cursor::START;
    let mut seen = Vec::new();
    drain_until(&c, &mut cursor, &mut seen, 1).await;
    assert_eq!(seen.len(), 1);
    for _ in 0..3 {
        c.batch_execute("BEGIN; SELECT pg_current_xact_id(); ROLLBACK").await.unwrap();
    }
    // Other tests' transactions hold the horizon back for a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = store.log_now().await.unwrap();
        assert!(now.txid <= cursor.txid, "{now} is past the last writer {cursor}");
        if now.txid == cursor.txid || std::time::Instant::now() > deadline {
            assert_eq!(now, Cursor { txid: cursor.txid, position: i64::MAX });
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
