//! Operators' controls as store commands: each records an event that
//! replay reproduces, and a paused manager claims nothing.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_core::lease::{Demand, LeaseEventType};
use berth_core::lease_event::{Control, HookResult};
use berth_store::commands::{Finish, LeaseDates, NewLease, NewReservation, Outcome};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{Duration, Utc};
use common::meta;
use uuid::Uuid;

async fn lease(store: &Store, name: &str, start: DateSpec, hours: i64) -> Uuid {
    let new = NewLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "alice".into(),
        dates: LeaseDates::One { start, end: DateSpec::At(Utc::now() + Duration::hours(hours)), before_end: None },
        reservations: vec![NewReservation {
            resource_type: "virtual:thing".into(),
            params: serde_json::json!({}),
            demand: Demand::Nothing,
        }],
    };
    store.create_lease(&meta(), new).await.unwrap()[0].record.id
}

async fn event_of(store: &Store, lease: Uuid, t: LeaseEventType) -> berth_store::queries::lease_events::LeaseEventRow {
    let filter = berth_store::queries::lease_events::LeaseEventFilter {
        lease_id: Some(lease),
        event_type: Some(t),
        ..Default::default()
    };
    store.lease_events(&filter).await.unwrap().remove(0)
}

/// Claims what is due as `who` and records it failed for good.
async fn fail_due(store: &Store, who: &str) -> usize {
    let claims = store.claim_lease_events(who, 10, Duration::seconds(30)).await.unwrap();
    let mut finishes = Vec::new();
    for c in &claims {
        // Every reservation's hook failed.
        let lease = store.lease(c.lease, None).await.unwrap().record;
        let hooks = lease
            .reservations
            .iter()
            .map(|r| HookResult {
                reservation: r.id,
                resource_type: r.resource_type.clone(),
                ok: false,
                detail: serde_json::json!("broken"),
                effects: vec![],
            })
            .collect();
        let outcome = Outcome::Failed { error: "broken".into() };
        finishes.push(Finish { lease: c.lease, event: c.event, attempt: c.attempt, outcome, hooks });
    }
    store.finish_lease_events(who, &finishes).await.unwrap();
    claims.len()
}

#[tokio::test]
async fn every_control_is_recorded_and_replays() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    // Paused: nothing is claimed, whoever asks.
    store.set_manager_paused(&meta(), true, "admin", "admin").await.unwrap();
    let broken = lease(&store, "broken", DateSpec::Now, 5).await;
    assert!(store.claim_lease_events("m1", 10, Duration::seconds(30)).await.unwrap().is_empty());
    let state = store.manager_state().await.unwrap();
    assert!(state.paused);
    assert_eq!(state.changed_by, Some(("admin".into(), "admin".into())));
    assert_eq!(state.due, 1);
    // Resumed: the start is claimed and fails for good; the lease is in ERROR.
    store.set_manager_paused(&meta(), false, "admin", "admin").await.unwrap();
    assert_eq!(fail_due(&store, "m1").await, 1);
    let start = event_of(&store, broken, LeaseEventType::StartLease).await;
    assert_eq!(start.status, "ERROR");
    assert_eq!(store.lease(broken, None).await.unwrap().record.status.as_str(), "ERROR");
    assert_eq!(store.manager_state().await.unwrap().error, 1);
    // Retried: due again from its first attempt; answered as the retry
    // left it (a manager may claim it as soon as it commits).
    let answered = store.control_lease_event(&meta(), start.id, Control::Retry).await.unwrap();
    assert_eq!((answered.id, answered.status.as_str(), answered.attempts), (start.id, "UNDONE", 0));
    let retried = event_of(&store, broken, LeaseEventType::StartLease).await;
    assert_eq!((retried.status.as_str(), retried.attempts), ("UNDONE", 0));
    assert_eq!(fail_due(&store, "m2").await, 1);
    // Recovered: the start ran (and failed), the end waits: ACTIVE.
    store.recover_lease(&meta(), broken, None).await.unwrap();
    assert_eq!(store.lease(broken, None).await.unwrap().record.status.as_str(), "ACTIVE");
    let e = store.recover_lease(&meta(), broken, None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::LeaseNotInError);
    // Ended now: its before-end and end fall due.
    store.end_lease(&meta(), broken, None).await.unwrap();
    let claims = store.claim_lease_events("m3", 10, Duration::seconds(30)).await.unwrap();
    assert_eq!(claims.len(), 1, "the before-end first, then the end: {claims:?}");
    // A later lease: cancel its before-end, fire its start.
    let later = lease(&store, "later", DateSpec::At(Utc::now() + Duration::hours(2)), 5).await;
    let before_end = event_of(&store, later, LeaseEventType::BeforeEndLease).await;
    let answered = store.control_lease_event(&meta(), before_end.id, Control::Cancel).await.unwrap();
    assert_eq!(answered.status, "CANCELLED");
    let e = store.control_lease_event(&meta(), before_end.id, Control::Fire).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::LeaseEventNotPending);
    let start = event_of(&store, later, LeaseEventType::StartLease).await;
    store.control_lease_event(&meta(), start.id, Control::Fire).await.unwrap();
    let l = store.lease(later, None).await.unwrap().record;
    assert!(l.start <= Utc::now(), "firing the start moved it to now: {}", l.start);
    let claimed = store.claim_lease_events("m4", 10, Duration::seconds(30)).await.unwrap();
    assert!(claimed.iter().any(|c| c.event == start.id), "{claimed:?}");
    assert_eq!(event_of(&store, later, LeaseEventType::BeforeEndLease).await.status, "CANCELLED");
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
}

/// The claim statement takes the manager's state itself: a claim made while
/// a pause is being made waits for it and, once it commits, claims nothing;
/// the claim's time and expiry are the database's, the expiry its time plus
/// the time to live.
#[tokio::test]
async fn a_claim_waits_for_a_pause_under_way_and_then_claims_nothing() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    lease(&store, "due", DateSpec::Now, 5).await;
    let (pauser, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    // A pause under way, as the pause command takes it: the row locked for
    // update, then changed.
    pauser
        .batch_execute("BEGIN; SELECT paused FROM manager_state FOR UPDATE; UPDATE manager_state SET paused = true")
        .await
        .unwrap();
    let claiming = tokio::spawn({
        let store = store.clone();
        async move { store.claim_lease_events("m1", 10, Duration::seconds(30)).await.unwrap() }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!claiming.is_finished(), "a claim must wait for a pause under way");
    pauser.batch_execute("COMMIT").await.unwrap();
    assert!(claiming.await.unwrap().is_empty(), "a claim after a pause claims nothing");
    // Resumed: the due event is claimed, with the database's times.
    pauser.batch_execute("UPDATE manager_state SET paused = false").await.unwrap();
    let before: chrono::DateTime<Utc> = pauser.query_one("SELECT statement_timestamp()", &[]).await.unwrap().get(0);
    let claims = store.claim_lease_events("m1", 10, Duration::seconds(30)).await.unwrap();
    assert_eq!(claims.len(), 1);
    let c = &claims[0];
    assert!(c.claimed_at >= before);
    assert_eq!(c.claim_expires_at, c.claimed_at + Duration::seconds(30));
    let row = event_of(&store, c.lease, LeaseEventType::StartLease).await;
    assert_eq!(row.claim_expires_at, Some(c.claim_expires_at));
}
