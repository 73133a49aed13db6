//! Recording how attempts ended: each lease event's status, its lease's
//! and reservations' statuses, and the effects its hooks asked for.

use std::collections::HashMap;

use berth_core::lease::{LeaseEventStatus, LeaseEventType, LeaseStatus};
use berth_core::lease_event::{self, Effect, HookResult};
use berth_core::time::DateMath;
use berth_core::Event;
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::effects::{effect_events, lock_effects, HostState};
use super::manager_meta;
use crate::commands::{now, record};
use crate::lock::{self, Sorted};
use crate::{sql, Store, StoreError};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every hook succeeded.
    Done,
    /// A hook failed and may succeed later: due again `retry_in` after the
    /// outcome is recorded (on the database's clock, as every due time).
    Retry { error: String, retry_in: std::time::Duration },
    /// A hook failed for good (or attempts ran out): ERROR.
    Failed { error: String },
}

/// What a manager records for one claimed lease event.
#[derive(Debug, Clone)]
pub struct Finish {
    pub lease: Uuid,
    pub event: Uuid,
    pub attempt: i32,
    pub outcome: Outcome,
    /// One per reservation that was tried; the effects of those that
    /// succeeded are recorded when the event finishes (DONE or ERROR).
    pub hooks: Vec<HookResult>,
}

/// Whether a finish was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Yes,
    /// The claim was no longer the caller's (it expired and another manager
    /// took it, or the lease was deleted): nothing was written.
    ClaimLost,
}

/// The rows a finish batch decides on, read under the locks of its leases
/// and lease events.
struct Current {
    /// By lease event: (status, attempts, claimed by, event type).
    events: HashMap<Uuid, (String, i32, Option<String>, String)>,
    /// By lease: (status, degraded).
    leases: HashMap<Uuid, (LeaseStatus, bool)>,
    /// By lease, in order: (reservation, status).
    reservations: HashMap<Uuid, Vec<(Uuid, String)>>,
}

/// Locks `leases` and the lease events `ids` (in that order, each sorted by
/// id) and reads them, with the leases' reservations.
async fn lock_current(tx: &Transaction<'_>, leases: &[Uuid], ids: &[Uuid]) -> Result<Current, StoreError> {
    let (lease_keys, event_keys): (Sorted<Uuid>, Sorted<Uuid>) =
        (leases.iter().copied().collect(), ids.iter().copied().collect());
    let (lock_leases, lock_events) = (lock::leases_status_stmt(&lease_keys), lock::lease_events(&event_keys));
    let [lease_rows, events, reservation_rows] = sql::pipeline(
        tx,
        [
            (lock_leases.0, &lock_leases.1[..]),
            (lock_events.0, &lock_events.1[..]),
            (
                "SELECT lease_id, id, status FROM reservations WHERE lease_id = ANY($1)
                 ORDER BY lease_id, position",
                &[&leases],
            ),
        ],
    )
    .await?;
    let events = events
        .iter()
        .map(lock::LockedEvent::from_row)
        .map(|e| (e.id, (e.status, e.attempts, e.claimed_by, e.event_type)))
        .collect();
    let leases = lease_rows
        .iter()
        .map(lock::LockedLease::from_row)
        .map(|l| (l.id, (LeaseStatus::parse(&l.status).unwrap_or(LeaseStatus::Error), l.degraded)))
        .collect();
    let mut reservations: HashMap<Uuid, Vec<(Uuid, String)>> = HashMap::new();
    for r in &reservation_rows {
        reservations.entry(r.get("lease_id")).or_default().push((r.get("id"), r.get("status")));
    }
    Ok(Current { events, leases, reservations })
}

/// Whether each finish is still the claimer's to record: its event still
/// IN_PROGRESS at the same attempt under the same claimer, its lease there.
fn still_claimed(finishes: &[Finish], current: &Current, claimer: &str) -> Vec<Recorded> {
    finishes
        .iter()
        .map(|f| match current.events.get(&f.event) {
            Some((status, attempts, by, _))
                if status == LeaseEventStatus::InProgress.as_str()
                    && *attempts == f.attempt
                    && by.as_deref() == Some(claimer)
                    && current.leases.contains_key(&f.lease) =>
            {
                Recorded::Yes
            }
            _ => Recorded::ClaimLost,
        })
        .collect()
}

/// The events a finish batch writes, grouped by kind (each kind writes its
/// own table, so the order between kinds does not matter) so that runs
/// apply set-wise.
#[derive(Default)]
struct Batch {
    outcomes: Vec<Event>,
    moved: Vec<Event>,
    reservation_statuses: Vec<Event>,
    lease_statuses: Vec<Event>,
}

impl Batch {
    fn into_events(self) -> Vec<Event> {
        let mut out = self.outcomes;
        out.extend(self.moved);
        out.extend(self.reservation_statuses);
        out.extend(self.lease_statuses);
        out
    }

    /// A recorded finish's events: its outcome and, unless it is retried,
    /// its hooks' effects and the statuses that follow.
    fn add(&mut self, f: &Finish, current: &mut Current, state: &mut HostState, at: DateTime<Utc>) {
        let (done, error) = match &f.outcome {
            Outcome::Retry { error, retry_in } => {
                self.outcomes.push(Event::LeaseEventRetrying {
                    lease: f.lease,
                    event: f.event,
                    attempt: f.attempt,
                    error: error.clone(),
                    retry_at: at
                        .saturating_plus(chrono::Duration::from_std(*retry_in).unwrap_or(chrono::Duration::days(365))),
                    hooks: f.hooks.clone(),
                    at,
                });
                return;
            }
            Outcome::Done => (true, None),
            Outcome::Failed { error } => (false, Some(error.clone())),
        };
        self.outcomes.push(Event::LeaseEventFinished {
            lease: f.lease,
            event: f.event,
            attempt: f.attempt,
            status: if done { LeaseEventStatus::Done } else { LeaseEventStatus::Error },
            error,
            hooks: f.hooks.clone(),
            at,
        });
        for h in f.hooks.iter().filter(|h| h.ok) {
            for e in &h.effects {
                effect_events(e, f.lease, state, at, &mut self.moved);
            }
        }
        self.statuses(f, done, current, at);
    }

    /// The statuses of a finished event's lease and reservations that
    /// change, as berth-core's rules say; `current` keeps them for the next
    /// finish of the same lease.
    fn statuses(&mut self, f: &Finish, done: bool, current: &mut Current, at: DateTime<Utc>) {
        let event_type =
            current.events.get(&f.event).and_then(|c| LeaseEventType::parse(&c.3)).unwrap_or(LeaseEventType::EndLease);
        let list = current.reservations.entry(f.lease).or_default();
        // A reservation whose hook was not tried has not failed.
        let ok: Vec<bool> = list
            .iter()
            .map(|(id, _)| done || f.hooks.iter().find(|h| h.reservation == *id).is_none_or(|h| h.ok))
            .collect();
        let (status, degraded) = current.leases[&f.lease];
        let (next, next_degraded, res) = lease_event::after_event(status, degraded, event_type, done, &ok);
        for ((id, was), s) in list.iter_mut().zip(res) {
            if let Some(s) = s.filter(|s| s.as_str() != was) {
                *was = s.as_str().to_string();
                self.reservation_statuses.push(Event::ReservationStatusChanged {
                    lease: f.lease,
                    reservation: *id,
                    status: s,
                    at,
                });
            }
        }
        if (next, next_degraded) != (status, degraded) {
            self.lease_statuses.push(Event::LeaseStatusChanged {
                id: f.lease,
                status: next,
                degraded: next_degraded,
                at,
            });
            current.leases.insert(f.lease, (next, next_degraded));
        }
    }
}

impl Store {
    /// Records how attempts ended, in one transaction: each lease event's
    /// status, its lease's and reservations' statuses, and the effects its
    /// hooks asked for. A finish whose claim is no longer the caller's is
    /// not recorded.
    pub async fn finish_lease_events(
        &self,
        claimer: &str,
        finishes: &[Finish],
    ) -> Result<Vec<Recorded>, berth_core::Error> {
        let mut leases: Vec<Uuid> = finishes.iter().map(|f| f.lease).collect();
        leases.sort();
        leases.dedup();
        let ids: Vec<Uuid> = finishes.iter().map(|f| f.event).collect();
        crate::tx::command!(self, |tx| {
            // The clock and the locks in one round trip (the clock read as
            // before: no later than the locks).
            let (mut current, at) = tokio::try_join!(lock_current(tx, &leases, &ids), now(tx))?;
            let recorded = still_claimed(finishes, &current, claimer);
            let effects: Vec<&Effect> = finishes
                .iter()
                .zip(&recorded)
                .filter(|(f, r)| **r == Recorded::Yes && !matches!(f.outcome, Outcome::Retry { .. }))
                .flat_map(|(f, _)| f.hooks.iter().filter(|h| h.ok).flat_map(|h| h.effects.iter()))
                .collect();
            let mut state = lock_effects(tx, &effects).await?;
            let mut batch = Batch::default();
            for (f, r) in finishes.iter().zip(&recorded) {
                if *r == Recorded::Yes {
                    batch.add(f, &mut current, &mut state, at);
                }
            }
            record(tx, &manager_meta(claimer), &batch.into_events()).await?;
            Ok(recorded)
        })
    }
}
