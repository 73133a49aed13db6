//! The manager's claim statement also answers when to look next, and the
//! hooks' reads of a claimed batch: an event falling due while a claim runs
//! is either claimed or in the next due time, never in neither; a hook sees
//! its lease and reservations as the lease's own read shows them.

mod common;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_store::commands::{LeaseDates, NewLease, NewReservation};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Duration, Utc};
use common::meta;
use uuid::Uuid;

async fn lease(store: &Store, name: &str, start: DateTime<Utc>, reservations: usize) -> Uuid {
    let new = NewLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "alice".into(),
        dates: LeaseDates::One {
            start: DateSpec::At(start),
            end: DateSpec::At(start + Duration::hours(2)),
            before_end: None,
        },
        reservations: (0..reservations)
            .map(|i| NewReservation {
                resource_type: "virtual:thing".into(),
                params: serde_json::json!({"n": i}),
                demand: Demand::Nothing,
            })
            .collect(),
    };
    store.create_lease(&meta(), new).await.unwrap()[0].record.id
}

/// Events fall due a millisecond apart while a manager claims again and
/// again: after every claim, no event still waiting is due before the
/// next due time the claim answered (so a manager sleeping until then
/// misses none), and every event is claimed once.
#[tokio::test]
async fn no_event_falls_due_between_a_claim_and_its_next_due_time() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let n = 200;
    // Far enough ahead that booking finishes before the first is due.
    let first = store.now().await.unwrap() + Duration::seconds(3);
    for i in 0..n {
        lease(&store, &format!("l{i}"), first + Duration::milliseconds(i), 1).await;
    }
    // Claims only from just before the first is due: each claim is a
    // transaction, and a reader of the log (another test on this server)
    // sees nothing newer than the oldest one running.
    let early = first - Duration::milliseconds(50) - store.now().await.unwrap();
    tokio::time::sleep(early.to_std().unwrap_or_default()).await;
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let mut claimed = std::collections::HashSet::new();
    while claimed.len() < n as usize {
        let (claims, next) = store.claim_lease_events_then_next("m1", 10_000, Duration::hours(3)).await.unwrap();
        for cl in &claims {
            assert!(claimed.insert(cl.event), "event {} claimed twice", cl.event);
            assert!(cl.due <= cl.claimed_at, "claimed before its due time");
        }
        assert!(next.now >= claims.first().map_or(next.now, |c| c.claimed_at), "the clock read after the claim");
        let waiting: Option<DateTime<Utc>> = c
            .query_one("SELECT min(coalesce(retry_at, time)) FROM lease_events WHERE status = 'UNDONE'", &[])
            .await
            .unwrap()
            .get(0);
        let waiting = waiting.expect("the leases' ends still wait");
        let due = next.due.expect("something is due later");
        assert!(due <= waiting, "an event due at {waiting} waits, but the claim said to look at {due}");
    }
    // What is left waits for later: the first lease's before-end comes
    // first, an hour before its end (the claims hold for longer).
    let (claims, next) = store.claim_lease_events_then_next("m1", 10_000, Duration::hours(3)).await.unwrap();
    assert!(claims.is_empty());
    assert_eq!(next.due, Some(first + Duration::hours(1)));
}

/// A hook's read of its lease (the manager's, batch by batch) gives the
/// lease and its reservations as the lease's own read does, without its
/// lease events; a lease that is gone is not in the answer.
#[tokio::test]
async fn hooks_see_their_lease_as_it_is_read() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let now = store.now().await.unwrap();
    let a = lease(&store, "a", now + Duration::hours(1), 3).await;
    let b = lease(&store, "b", now + Duration::hours(1), 1).await;
    let gone = Uuid::new_v4();
    let contexts = store.hook_contexts(&[b, a, gone, a]).await.unwrap();
    assert_eq!(contexts.len(), 2);
    for id in [a, b] {
        let mut whole = store.lease(id, None).await.unwrap().record;
        assert_eq!(whole.events.len(), 3);
        whole.events.clear();
        assert_eq!(contexts[&id].lease, whole);
        assert!(contexts[&id].provider_names.is_empty() && contexts[&id].others.is_empty());
    }
}
