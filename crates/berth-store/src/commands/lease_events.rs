//! The manager's commands: claim due lease events, renew claims, record what
//! their hooks did, and return hosts held back at a lease's end.
//!
//! Claiming is one statement: due events (and events whose claim expired:
//! their claimer died) are locked with `FOR UPDATE SKIP LOCKED`, so any
//! number of managers claim disjoint batches without waiting on each other,
//! and updated to IN_PROGRESS with the claimer, the next attempt number and
//! a claim expiry. The update is the set-wise form of applying the
//! `LeaseEventClaimed` events appended beside it (replay applies those one
//! by one and must give the same rows). A claim that expired is taken back
//! only while the row is still IN_PROGRESS with an expired claim, re-checked
//! under the lock, so an event that finished meanwhile is never overwritten.

use berth_core::time::DateMath;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use berth_core::lease::{LeaseEventStatus, LeaseEventType, LeaseStatus, FREE_POOL};
use berth_core::lease_event::{self, Effect, HookResult};
use berth_core::{Event, EventMeta};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::{now, record};
use crate::{sql, Store, StoreError};

/// A lease event a manager now works on.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub lease: Uuid,
    pub event: Uuid,
    pub event_type: LeaseEventType,
    /// The time the lease gave the event.
    pub time: DateTime<Utc>,
    /// When this attempt became due (`time`, or the retry time).
    pub due: DateTime<Utc>,
    pub attempt: i32,
    /// When the claim was made, on the database's clock.
    pub claimed_at: DateTime<Utc>,
    pub claim_expires_at: DateTime<Utc>,
    /// The claimer whose claim had expired, when this claim took it back.
    pub rescued_from: Option<String>,
}

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

/// Lease event types in firing order within one lease.
const ORDER: &str = "CASE event_type WHEN 'start_lease' THEN 0 WHEN 'before_end_lease' THEN 1 ELSE 2 END";

fn claim_sql() -> String {
    let own = ORDER.replace("event_type", "o.event_type");
    let mine = ORDER.replace("event_type", "e.event_type");
    // The rules every candidate must meet, waiting or expired alike.
    let rules = format!(
        "-- A lease's own events fire in order: start, before end, end.
         AND NOT EXISTS (
             SELECT 1 FROM lease_events o
             WHERE o.lease_id = e.lease_id AND o.status IN ('UNDONE', 'IN_PROGRESS') AND {own} < {mine})
         -- Whole hosts: another lease's end (or before end) due no later on
         -- the same host runs before this start.
         AND (e.event_type <> 'start_lease' OR NOT EXISTS (
             SELECT 1
             FROM reservations re
             JOIN reservation_slots se ON se.reservation_id = re.id
             JOIN reservation_slots so ON so.provider_uuid = se.provider_uuid
             JOIN reservations ro ON ro.id = so.reservation_id
             JOIN lease_events o ON o.lease_id = ro.lease_id
             WHERE re.lease_id = e.lease_id AND re.resource_type = 'physical:host'
               AND ro.resource_type = 'physical:host' AND ro.lease_id <> e.lease_id
               AND o.event_type IN ('end_lease', 'before_end_lease')
               AND o.status IN ('UNDONE', 'IN_PROGRESS') AND o.time <= e.time))"
    );
    let priority = "CASE e.event_type WHEN 'end_lease' THEN 0 WHEN 'before_end_lease' THEN 1 ELSE 2 END";
    // Two scans, each in the order of its own index and no finer, so each
    // stops as soon as it has enough (a finer order would look at every
    // event due at the same instant before taking any; ends before starts
    // are the rules' business): events waiting for their due time, and
    // claims that expired. A lease being updated or deleted is skipped (its
    // row is locked); an update waits for the claim, then sees its event
    // started. The id list lets the update find its rows by index.
    format!(
        "WITH waiting AS (
             SELECT e.id, e.status AS was, e.claimed_by AS was_by, coalesce(e.retry_at, e.time) AS due,
                    {priority} AS priority
             FROM lease_events e JOIN leases l ON l.id = e.lease_id
             WHERE e.status = 'UNDONE' AND coalesce(e.retry_at, e.time) <= $1
               {rules}
             ORDER BY coalesce(e.retry_at, e.time)
             LIMIT $2
             FOR UPDATE OF e SKIP LOCKED FOR SHARE OF l SKIP LOCKED
         ), expired AS (
             SELECT e.id, e.status AS was, e.claimed_by AS was_by, coalesce(e.retry_at, e.time) AS due,
                    {priority} AS priority
             FROM lease_events e JOIN leases l ON l.id = e.lease_id
             WHERE e.status = 'IN_PROGRESS' AND e.claim_expires_at <= $1
               {rules}
             ORDER BY e.claim_expires_at
             LIMIT $2
             FOR UPDATE OF e SKIP LOCKED FOR SHARE OF l SKIP LOCKED
         ), picked AS (
             SELECT * FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) AS both_kinds
             ORDER BY due, priority, id
             LIMIT $2
         )
         UPDATE lease_events e
         SET status = 'IN_PROGRESS', attempts = e.attempts + 1, claimed_by = $3, claim_expires_at = $4, updated_at = $1
         FROM picked WHERE e.id = picked.id AND e.id = ANY (ARRAY(SELECT id FROM picked))
         RETURNING e.lease_id, e.id, e.event_type, e.time, picked.due, e.attempts, picked.was, picked.was_by"
    )
}

fn manager_meta(claimer: &str) -> EventMeta {
    EventMeta { actor: Some(format!("manager:{claimer}")), ..Default::default() }
}

/// Current aggregates of providers, reservable flag and capabilities of hosts,
/// and holds, as a finish batch reads them under its locks.
#[derive(Default)]
struct HostState {
    aggregates: HashMap<Uuid, BTreeSet<Uuid>>,
    hosts: HashMap<Uuid, (bool, BTreeMap<String, Value>)>,
    holds: HashSet<Uuid>,
    /// Consumers to delete: (project, user, type).
    consumers: HashMap<Uuid, (String, String, Option<String>)>,
    /// The reservation slots each consumer to delete draws from.
    draws: HashMap<Uuid, Vec<Uuid>>,
}

fn effect_hosts(e: &Effect) -> &[Uuid] {
    match e {
        Effect::MoveHosts { hosts, .. }
        | Effect::SetReservable { hosts, .. }
        | Effect::HoldHosts { hosts, .. }
        | Effect::ReleaseHolds { hosts } => hosts,
        Effect::DeleteConsumers { .. } => &[],
    }
}

/// Locks what `effects` touch (consumers, then providers, each sorted) and
/// reads their current state.
async fn lock_effects(tx: &deadpool_postgres::Transaction<'_>, effects: &[&Effect]) -> Result<HostState, StoreError> {
    let mut state = HostState::default();
    let mut consumers: Vec<Uuid> = effects
        .iter()
        .flat_map(|e| match e {
            Effect::DeleteConsumers { consumers } => consumers.clone(),
            _ => Vec::new(),
        })
        .collect();
    consumers.sort();
    consumers.dedup();
    let mut providers: BTreeSet<Uuid> = effects.iter().flat_map(|e| effect_hosts(e).iter().copied()).collect();
    if !consumers.is_empty() {
        for r in tx
            .query(
                "SELECT uuid, project_id, user_id, consumer_type FROM consumers WHERE uuid = ANY($1)
                 ORDER BY uuid FOR UPDATE",
                &[&consumers],
            )
            .await?
        {
            state.consumers.insert(r.get(0), (r.get(1), r.get(2), r.get(3)));
        }
        let held: Vec<Uuid> = state.consumers.keys().copied().collect();
        for r in
            tx.query("SELECT DISTINCT provider_uuid FROM allocations WHERE consumer_uuid = ANY($1)", &[&held]).await?
        {
            providers.insert(r.get(0));
        }
    }
    if providers.is_empty() {
        return Ok(state);
    }
    let providers: Vec<Uuid> = providers.into_iter().collect();
    let found = sql::pipeline(
        tx,
        [
            ("SELECT uuid FROM providers WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE", &[&providers]),
            ("SELECT provider_uuid, aggregate FROM provider_aggregates WHERE provider_uuid = ANY($1)", &[&providers]),
            ("SELECT provider_uuid, reservable, capabilities FROM hosts WHERE provider_uuid = ANY($1)", &[&providers]),
            ("SELECT provider_uuid FROM host_holds WHERE provider_uuid = ANY($1)", &[&providers]),
        ],
    )
    .await?;
    for r in &found[0] {
        state.aggregates.insert(r.get(0), BTreeSet::new());
    }
    for r in &found[1] {
        state.aggregates.entry(r.get(0)).or_default().insert(r.get(1));
    }
    for r in &found[2] {
        let caps: Value = r.get(2);
        state.hosts.insert(r.get(0), (r.get(1), serde_json::from_value(caps).unwrap_or_default()));
    }
    for r in &found[3] {
        state.holds.insert(r.get(0));
    }
    Ok(state)
}

/// The events that carry out `effect`, updating `state` so the next effect
/// in the batch sees it.
fn effect_events(effect: &Effect, lease: Uuid, state: &mut HostState, at: DateTime<Utc>, out: &mut Vec<Event>) {
    match effect {
        Effect::MoveHosts { hosts, leave, join } => {
            for h in hosts {
                let Some(aggs) = state.aggregates.get_mut(h) else { continue };
                let before = aggs.clone();
                for l in leave {
                    aggs.remove(l);
                }
                if let Some(j) = join {
                    aggs.insert(*j);
                }
                if *aggs != before {
                    out.push(Event::ProviderAggregatesReplaced {
                        provider: *h,
                        aggregates: aggs.clone(),
                        bump: true,
                        at,
                    });
                }
            }
        }
        Effect::DeleteConsumers { consumers } => {
            for c in consumers {
                if let Some((project_id, user_id, consumer_type)) = state.consumers.remove(c) {
                    out.push(Event::AllocationsReplaced {
                        consumer: *c,
                        project_id,
                        user_id,
                        consumer_type,
                        allocations: Vec::new(),
                        // As Placement's delete: no provider generation moves.
                        providers_bumped: Some(Vec::new()),
                        at,
                    });
                    // What it drew from a reservation's hold goes with it.
                    for slot in state.draws.remove(c).unwrap_or_default() {
                        out.push(Event::ReservationDrawn { slot, consumer: *c, resources: BTreeMap::new(), at });
                    }
                }
            }
        }
        Effect::SetReservable { hosts, reservable } => {
            for h in hosts {
                if let Some((r, caps)) = state.hosts.get_mut(h) {
                    if *r != *reservable {
                        *r = *reservable;
                        out.push(Event::HostUpdated {
                            provider: *h,
                            reservable: *reservable,
                            capabilities: caps.clone(),
                            at,
                        });
                    }
                }
            }
        }
        Effect::HoldHosts { hosts, pool, until, for_s } => {
            let until =
                until.or_else(|| for_s.and_then(|s| at.checked_add_signed(chrono::Duration::seconds(s as i64))));
            for h in hosts {
                if state.hosts.contains_key(h) {
                    state.holds.insert(*h);
                    out.push(Event::HostHeld { provider: *h, pool: *pool, until, lease, at });
                }
            }
        }
        Effect::ReleaseHolds { hosts } => {
            for h in hosts {
                if state.holds.remove(h) {
                    out.push(Event::HostHoldReleased { provider: *h, at });
                }
            }
        }
    }
}

/// A host held back at a lease's end whose time to return has come.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldHost {
    pub provider: Uuid,
    pub name: String,
    pub pool: Uuid,
    pub until: Option<DateTime<Utc>>,
    pub lease: Uuid,
    /// Consumers other than reservations holding it now.
    pub others: Vec<Uuid>,
}

impl Store {
    /// Claims up to `limit` due lease events (and events whose claim expired)
    /// for `claimer`, holding them for `ttl`. Ends and before-ends come
    /// before starts due at the same time.
    pub async fn claim_lease_events(
        &self,
        claimer: &str,
        limit: i64,
        ttl: chrono::Duration,
    ) -> Result<Vec<Claim>, berth_core::Error> {
        let statement = claim_sql();
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let expires = at.saturating_plus(ttl);
            let rows = sql::query(tx, &statement, &[&at, &limit, &claimer, &expires]).await?;
            let mut claims = Vec::with_capacity(rows.len());
            for r in rows {
                let event_type: String = r.get(2);
                let was: String = r.get(6);
                claims.push(Claim {
                    lease: r.get(0),
                    event: r.get(1),
                    event_type: LeaseEventType::parse(&event_type).unwrap_or(LeaseEventType::EndLease),
                    time: r.get(3),
                    due: r.get(4),
                    attempt: r.get(5),
                    claimed_at: at,
                    claim_expires_at: expires,
                    rescued_from: (was == LeaseEventStatus::InProgress.as_str())
                        .then(|| r.get::<_, Option<String>>(7).unwrap_or_default()),
                });
            }
            claims.sort_by_key(|c| (c.due, lease_event::priority(c.event_type), c.event));
            let events: Vec<Event> = claims
                .iter()
                .map(|c| Event::LeaseEventClaimed {
                    lease: c.lease,
                    event: c.event,
                    event_type: c.event_type,
                    attempt: c.attempt,
                    claimed_by: claimer.to_string(),
                    claim_expires_at: expires,
                    rescued_from: c.rescued_from.clone(),
                    at,
                })
                .collect();
            // Appended only: the statement above already wrote what
            // applying them gives.
            crate::log::append(tx, &manager_meta(claimer), &events).await?;
            Ok(claims)
        })
    }

    /// Extends `claimer`'s claims on `events` (event id, attempt) to now +
    /// `ttl`. Returns the events whose claim is still the claimer's; the
    /// others were taken back by another manager after they expired.
    pub async fn renew_claims(
        &self,
        claimer: &str,
        events: &[(Uuid, i32)],
        ttl: chrono::Duration,
    ) -> Result<Vec<Uuid>, berth_core::Error> {
        let ids: Vec<Uuid> = events.iter().map(|e| e.0).collect();
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let expires = at.saturating_plus(ttl);
            let rows = tx
                .query(
                    "SELECT lease_id, id, attempts FROM lease_events
                     WHERE id = ANY($1) AND status = 'IN_PROGRESS' AND claimed_by = $2 ORDER BY id FOR UPDATE",
                    &[&ids, &claimer],
                )
                .await?;
            let mut kept = Vec::new();
            let mut out = Vec::new();
            for r in rows {
                let (lease, event, attempts): (Uuid, Uuid, i32) = (r.get(0), r.get(1), r.get(2));
                if events.contains(&(event, attempts)) {
                    kept.push(event);
                    out.push(Event::LeaseEventClaimRenewed {
                        lease,
                        event,
                        claimed_by: claimer.to_string(),
                        claim_expires_at: expires,
                        at,
                    });
                }
            }
            record(tx, &manager_meta(claimer), &out).await?;
            Ok(kept)
        })
    }

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
            let at = now(tx).await?;
            let [_, events, lease_rows, reservation_rows] = sql::pipeline(
                tx,
                [
                    ("SELECT 1 FROM leases WHERE id = ANY($1) ORDER BY id FOR UPDATE", &[&leases]),
                    (
                        "SELECT id, status, attempts, claimed_by, event_type FROM lease_events
                         WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                        &[&ids],
                    ),
                    ("SELECT id, status, degraded FROM leases WHERE id = ANY($1)", &[&leases]),
                    (
                        "SELECT lease_id, id, status FROM reservations WHERE lease_id = ANY($1)
                         ORDER BY lease_id, position",
                        &[&leases],
                    ),
                ],
            )
            .await?;
            let current: HashMap<Uuid, (String, i32, Option<String>, String)> =
                events.iter().map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3), r.get(4)))).collect();
            let mut lease_state: HashMap<Uuid, (LeaseStatus, bool)> = lease_rows
                .iter()
                .map(|r| {
                    let s: String = r.get(1);
                    (r.get(0), (LeaseStatus::parse(&s).unwrap_or(LeaseStatus::Error), r.get(2)))
                })
                .collect();
            let mut reservations: HashMap<Uuid, Vec<(Uuid, String)>> = HashMap::new();
            for r in &reservation_rows {
                reservations.entry(r.get(0)).or_default().push((r.get(1), r.get(2)));
            }
            let recorded: Vec<Recorded> = finishes
                .iter()
                .map(|f| match current.get(&f.event) {
                    Some((status, attempts, by, _))
                        if status == LeaseEventStatus::InProgress.as_str()
                            && *attempts == f.attempt
                            && by.as_deref() == Some(claimer)
                            && lease_state.contains_key(&f.lease) =>
                    {
                        Recorded::Yes
                    }
                    _ => Recorded::ClaimLost,
                })
                .collect();
            let effects: Vec<&Effect> = finishes
                .iter()
                .zip(&recorded)
                .filter(|(f, r)| **r == Recorded::Yes && !matches!(f.outcome, Outcome::Retry { .. }))
                .flat_map(|(f, _)| f.hooks.iter().filter(|h| h.ok).flat_map(|h| h.effects.iter()))
                .collect();
            let mut state = lock_effects(tx, &effects).await?;
            // Grouped by kind (each kind writes its own table, so the order
            // between kinds does not matter) so that runs apply set-wise.
            let (mut outcomes, mut moved, mut reservation_statuses, mut lease_statuses) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (f, r) in finishes.iter().zip(&recorded) {
                if *r != Recorded::Yes {
                    continue;
                }
                let event_type =
                    current.get(&f.event).and_then(|c| LeaseEventType::parse(&c.3)).unwrap_or(LeaseEventType::EndLease);
                let (done, error) = match &f.outcome {
                    Outcome::Retry { error, retry_in } => {
                        outcomes.push(Event::LeaseEventRetrying {
                            lease: f.lease,
                            event: f.event,
                            attempt: f.attempt,
                            error: error.clone(),
                            retry_at: at.saturating_plus(
                                chrono::Duration::from_std(*retry_in).unwrap_or(chrono::Duration::days(365)),
                            ),
                            hooks: f.hooks.clone(),
                            at,
                        });
                        continue;
                    }
                    Outcome::Done => (true, None),
                    Outcome::Failed { error } => (false, Some(error.clone())),
                };
                outcomes.push(Event::LeaseEventFinished {
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
                        effect_events(e, f.lease, &mut state, at, &mut moved);
                    }
                }
                let list = reservations.entry(f.lease).or_default();
                // A reservation whose hook was not tried has not failed.
                let ok: Vec<bool> = list
                    .iter()
                    .map(|(id, _)| done || f.hooks.iter().find(|h| h.reservation == *id).is_none_or(|h| h.ok))
                    .collect();
                let (status, degraded) = lease_state[&f.lease];
                let (next, next_degraded, res) = lease_event::after_event(status, degraded, event_type, done, &ok);
                for ((id, was), s) in list.iter_mut().zip(res) {
                    if let Some(s) = s.filter(|s| s.as_str() != was) {
                        *was = s.as_str().to_string();
                        reservation_statuses.push(Event::ReservationStatusChanged {
                            lease: f.lease,
                            reservation: *id,
                            status: s,
                            at,
                        });
                    }
                }
                if (next, next_degraded) != (status, degraded) {
                    lease_statuses.push(Event::LeaseStatusChanged {
                        id: f.lease,
                        status: next,
                        degraded: next_degraded,
                        at,
                    });
                    lease_state.insert(f.lease, (next, next_degraded));
                }
            }
            let mut out = outcomes;
            out.append(&mut moved);
            out.append(&mut reservation_statuses);
            out.append(&mut lease_statuses);
            record(tx, &manager_meta(claimer), &out).await?;
            Ok(recorded)
        })
    }

    /// Hosts held back with `recycle` whose time has come: their grace
    /// period is over, or nothing but reservations holds them now.
    pub async fn held_hosts_due(&self) -> Result<Vec<HeldHost>, berth_core::Error> {
        let c = self.client().await?;
        let at = now(&c).await?;
        let rows = c
            .query(
                "SELECT h.provider_uuid, p.name, h.pool, h.until, h.lease_id,
                        coalesce((SELECT array_agg(DISTINCT a.consumer_uuid) FROM allocations a
                                  JOIN consumers c ON c.uuid = a.consumer_uuid
                                  WHERE a.provider_uuid = h.provider_uuid
                                    AND c.consumer_type IS DISTINCT FROM 'RESERVATION'
                                    AND (a.during @> $1::timestamptz OR a.consumer_uuid IN (
                                        SELECT d.consumer_uuid FROM reservation_draws d
                                        JOIN reservation_slots s ON s.consumer_uuid = d.slot_consumer
                                        JOIN reservations r ON r.id = s.reservation_id
                                        WHERE r.lease_id = h.lease_id))), '{}')
                 FROM host_holds h JOIN providers p ON p.uuid = h.provider_uuid
                 WHERE h.until IS NOT NULL ORDER BY h.until",
                &[&at],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| HeldHost {
                provider: r.get(0),
                name: r.get(1),
                pool: r.get(2),
                until: r.get(3),
                lease: r.get(4),
                others: r.get(5),
            })
            .filter(|h| h.others.is_empty() || h.until.is_some_and(|u| u <= at))
            .collect())
    }

    /// Returns a held-back host to the free pool, reservable, after applying
    /// `effects` (e.g. its other consumers deleted). Nothing happens when
    /// the host is no longer held (another manager returned it first).
    pub async fn return_held_host(
        &self,
        actor: &str,
        provider: Uuid,
        effects: &[Effect],
    ) -> Result<bool, berth_core::Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let mut all: Vec<Effect> = effects.to_vec();
            all.push(Effect::MoveHosts {
                hosts: vec![provider],
                leave: vec![lease_event::RECYCLE_POOL, lease_event::SHARED_POOL],
                join: Some(FREE_POOL),
            });
            all.push(Effect::SetReservable { hosts: vec![provider], reservable: true });
            all.push(Effect::ReleaseHolds { hosts: vec![provider] });
            let refs: Vec<&Effect> = all.iter().collect();
            let mut state = lock_effects(tx, &refs).await?;
            let hold = tx.query_opt("SELECT lease_id FROM host_holds WHERE provider_uuid = $1", &[&provider]).await?;
            let Some(hold) = hold else {
                return Ok(false);
            };
            let lease: Uuid = hold.get(0);
            let mut out = Vec::new();
            for e in &all {
                effect_events(e, lease, &mut state, at, &mut out);
            }
            record(tx, &EventMeta { actor: Some(actor.to_string()), ..Default::default() }, &out).await?;
            Ok(true)
        })
    }
}
