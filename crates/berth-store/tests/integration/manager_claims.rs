//! The manager's claim statement also answers when to look next, and the
//! hooks' reads of a claimed batch: an event falling due while a claim runs
//! is either claimed or in the next due time, never in neither; a hook sees
//! its lease and reservations as the lease's own read shows them; and only
//! due times a manager could miss notify it.

use crate::common;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_store::commands::{LeaseDates, NewLease, NewReservation};
use berth_store::notify::{Notification, LEASE_EVENTS};
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

/// The recorder's question after a batch: is an event due and unclaimed?
/// Yes for a start due, no once it is claimed (and the lease's next events
/// are ahead), yes again once a claim has expired.
#[tokio::test]
async fn an_event_due_and_unclaimed_is_waiting() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    assert!(!store.lease_events_waiting().await.unwrap(), "no event at all");
    let now = store.now().await.unwrap();
    lease(&store, "ahead", now + Duration::hours(1), 1).await;
    assert!(!store.lease_events_waiting().await.unwrap(), "only events ahead");
    lease(&store, "due", now, 1).await;
    assert!(store.lease_events_waiting().await.unwrap(), "a start due");
    let claims = store.claim_lease_events("m1", 10, Duration::minutes(1)).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert!(!store.lease_events_waiting().await.unwrap(), "the start claimed");
    lease(&store, "rescued", now, 1).await;
    let claims = store.claim_lease_events("m1", 10, Duration::zero()).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert!(store.lease_events_waiting().await.unwrap(), "a claim expired");
}

/// The claim statement answers the claimed events' leases as hooks see
/// them: with `hook_contexts_of`, the same contexts as a read of their own
/// (`hook_contexts`), slots and the hosts' names included.
#[tokio::test]
async fn a_claim_answers_its_leases_as_hooks_read_them() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    for name in ["h1", "h2"] {
        store
            .enrol_host(
                &meta(),
                berth_store::commands::NewHost {
                    name: name.into(),
                    resources: Some((8, 16384, 100)),
                    reservable: true,
                    capabilities: std::collections::BTreeMap::new(),
                },
            )
            .await
            .unwrap();
    }
    let now = store.now().await.unwrap();
    let hosts = NewLease {
        name: "hosts".into(),
        project_id: "p1".into(),
        user_id: "alice".into(),
        dates: LeaseDates::One {
            start: DateSpec::At(now),
            end: DateSpec::At(now + Duration::hours(2)),
            before_end: None,
        },
        reservations: vec![
            NewReservation {
                resource_type: "physical:host".into(),
                params: serde_json::json!({"min": 2, "max": 2}),
                demand: Demand::Hosts { min: 2, max: 2, hypervisor_properties: None, resource_properties: None },
            },
            NewReservation {
                resource_type: "virtual:thing".into(),
                params: serde_json::json!({}),
                demand: Demand::Nothing,
            },
        ],
    };
    let a = store.create_lease(&meta(), hosts).await.unwrap()[0].record.id;
    let b = lease(&store, "things", now, 3).await;
    let claimed = store.claim_lease_events_for_hooks("m1", 10, Duration::minutes(1)).await.unwrap();
    assert_eq!(claimed.claims.len(), 2);
    let mut ids: Vec<Uuid> = claimed.leases.iter().map(|l| l.id).collect();
    ids.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(ids, want, "each claimed lease once");
    let slots: usize = claimed.leases.iter().flat_map(|l| &l.reservations).map(|r| r.slots.len()).sum();
    assert_eq!(slots, 2, "the hosts' slots");
    let answered = store.hook_contexts_of(claimed.leases).await.unwrap();
    let read = store.hook_contexts(&[a, b]).await.unwrap();
    assert_eq!(answered.len(), 2);
    for id in [a, b] {
        assert_eq!(answered[&id].lease, read[&id].lease);
        assert_eq!(answered[&id].provider_names, read[&id].provider_names);
        assert_eq!(answered[&id].others, read[&id].others);
    }
    assert_eq!(answered[&a].provider_names.len(), 2);
}

/// A claimer's kept connection: its claims run on one connection, held out
/// of the pool between them (given back when dropped), and a connection
/// the server drops costs one failed claim at most (the pool's, dropped
/// too, as many as were open); the next claim takes another and claims
/// what the failed one did not, every event once.
#[tokio::test]
async fn a_kept_connection_claims_and_survives_its_loss() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let now = store.now().await.unwrap();
    let n = 6;
    for i in 0..n {
        lease(&store, &format!("l{i}"), now, 1).await;
    }
    let mut kept = berth_store::commands::KeptConnection::default();
    let mut claimed = std::collections::HashSet::new();
    let first = store.claim_lease_events_kept(&mut kept, "m1", 2, Duration::hours(3)).await.unwrap();
    claimed.extend(first.claims.iter().map(|c| c.event));
    let held = store.pool_status();
    assert_eq!(held.open - held.idle, 1, "the kept connection is out of the pool: {held:?}");
    let again = store.claim_lease_events_kept(&mut kept, "m1", 2, Duration::hours(3)).await.unwrap();
    claimed.extend(again.claims.iter().map(|c| c.event));
    assert_eq!(store.pool_status().open, held.open, "no other connection opened for the second claim");
    // The server drops every other connection of this database.
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
        &[],
    )
    .await
    .unwrap();
    let lost = store.pool_status().open;
    let mut failed = 0;
    while claimed.len() < n {
        match store.claim_lease_events_kept(&mut kept, "m1", 2, Duration::hours(3)).await {
            Ok(got) => {
                assert!(!got.claims.is_empty(), "events due are left");
                for cl in got.claims {
                    assert!(claimed.insert(cl.event), "event {} claimed twice", cl.event);
                }
            }
            Err(_) => failed += 1,
        }
        assert!(failed <= lost, "a lost connection fails one claim at most ({failed} of {lost} lost)");
    }
    let starts: i64 =
        c.query_one("SELECT count(*) FROM lease_events WHERE status = 'IN_PROGRESS'", &[]).await.unwrap().get(0);
    assert_eq!(starts, n as i64, "every start claimed once");
    drop(kept);
    let back = store.pool_status();
    assert_eq!(back.open, back.idle, "dropped, the kept connection is back in the pool: {back:?}");
}

/// The next due time announced on the managers' channel, if one comes
/// within a second.
async fn announced(notes: &mut tokio::sync::mpsc::Receiver<Notification>) -> Option<DateTime<Utc>> {
    match tokio::time::timeout(std::time::Duration::from_secs(1), notes.recv()).await {
        Ok(Some(Notification::Payload(p))) => Some(DateTime::from_timestamp_micros(p.parse().unwrap()).unwrap()),
        Ok(other) => panic!("not a due time: {other:?}"),
        Err(_) => None,
    }
}

/// Lease events notify the managers of a due time only when it falls
/// before the widest horizon a manager said (it would find a later one by
/// polling); before any said one, every due time notifies. Notifications
/// arrive in commit order, so a far due time that notified would be read
/// before the near one.
#[tokio::test]
async fn only_due_times_inside_the_managers_wake_horizon_notify() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let mut notes = store.listen(LEASE_EVENTS);
    assert_eq!(notes.recv().await, Some(Notification::Connected));
    let now = store.now().await.unwrap();
    let close = |a: Option<DateTime<Utc>>, b: DateTime<Utc>| a.is_some_and(|a| (a - b).num_milliseconds().abs() <= 1);

    let day_ahead = now + Duration::days(1);
    lease(&store, "unsaid", day_ahead, 1).await;
    assert!(close(announced(&mut notes).await, day_ahead), "no horizon said: every due time notifies");

    store.widen_wake_horizon(std::time::Duration::from_secs(10)).await.unwrap();
    // A narrower horizon said later does not narrow it.
    store.widen_wake_horizon(std::time::Duration::from_secs(2)).await.unwrap();
    let far = lease(&store, "far", day_ahead, 1).await;
    let soon = now + Duration::seconds(5);
    lease(&store, "soon", soon, 1).await;
    assert!(close(announced(&mut notes).await, soon), "a day ahead notified, or five seconds ahead did not");

    // Moving an event waiting: the same rule.
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let moved = "UPDATE lease_events SET time = time + $2 * interval '1 second'
                 WHERE lease_id = $1 AND event_type = 'start_lease' RETURNING time";
    c.query_one(moved, &[&far, &60.0f64]).await.unwrap();
    let back: DateTime<Utc> = c.query_one(moved, &[&far, &(-86_400.0f64 - 57.0)]).await.unwrap().get(0);
    assert!(close(announced(&mut notes).await, back), "a day ahead notified, or three seconds ahead did not");
    assert_eq!(announced(&mut notes).await, None);
}
