//! Claiming due lease events, and renewing claims.
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
//!
//! While an operator has paused the managers (`manager_state`), nothing is
//! claimed: the claim statement key-share locks that row first (a pause
//! waits for claims under way, and a claim after it sees it) and claims
//! nothing from a paused state. The statement also reads the database's
//! clock itself and appends the `LeaseEventClaimed` events to the log (their
//! data built by the statement as serde writes it), so a claim is one
//! statement in one round trip, with no transaction of its own around it.

use berth_core::lease::{LeaseEventStatus, LeaseEventType, LeaseRecord};
use berth_core::lease_event;
use berth_core::time::DateMath;
use berth_core::Event;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::manager_meta;
use crate::commands::{now, record};
use crate::queries::lease_events::{reservation_of, slots_of, NextDue, HOOK_LEASE_COLUMNS, NEXT_DUE, SLOTS_JSON};
use crate::queries::leases::lease_of;
use crate::{lock, sql, Store, StoreError};

/// The claim statement's parameters: the most events, the claimer, the
/// claim's time to live in microseconds, the log's metadata and event type.
type Params<'a> = [&'a (dyn tokio_postgres::types::ToSql + Sync); 5];

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

/// What a claim statement answered.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// Due first, ends and before-ends before starts due at once.
    pub claims: Vec<Claim>,
    /// When to look next.
    pub next: NextDue,
    /// The claimed events' leases, as hooks see them without their other
    /// consumers and provider names ([`Store::hook_contexts_of`]).
    pub leases: Vec<LeaseRecord>,
}

/// Lease event types in firing order within one lease.
const ORDER: &str = "CASE event_type WHEN 'start_lease' THEN 0 WHEN 'before_end_lease' THEN 1 ELSE 2 END";

/// The rules every candidate `e` must meet, waiting or expired alike.
fn rules_sql() -> String {
    let own = ORDER.replace("event_type", "o.event_type");
    let mine = ORDER.replace("event_type", "e.event_type");
    format!(
        "-- A lease's own events fire in order: start, before end, end.
         -- (OFFSET 0 keeps it a lookup of the lease's three events per
         -- candidate: as an anti join, on tables without statistics yet, it
         -- compared every candidate with every waiting event, a second for
         -- a burst of 1,000.)
         AND NOT EXISTS (
             SELECT 1 FROM lease_events o
             WHERE o.lease_id = e.lease_id AND o.status IN ('UNDONE', 'IN_PROGRESS') AND {own} < {mine}
             OFFSET 0)
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
    )
}

fn claim_sql() -> String {
    let rules = rules_sql();
    let priority = "CASE e.event_type WHEN 'end_lease' THEN 0 WHEN 'before_end_lease' THEN 1 ELSE 2 END";
    // Two scans, each in the order of its own index and no finer, so each
    // stops as soon as it has enough (a finer order would look at every
    // event due at the same instant before taking any; ends before starts
    // are the rules' business): events waiting for their due time, and
    // claims that expired. A lease being updated or deleted is skipped (its
    // row is locked); an update waits for the claim, then sees its event
    // started. The id list lets the update find its rows by index.
    // The gate (the manager's state, key-share locked) is read before any
    // scan starts: each scan's `NOT paused` is a one-time filter.
    let gate = lock::MANAGER_CLAIMING;
    format!(
        "WITH gate AS MATERIALIZED ({gate}), waiting AS (
             SELECT e.id, e.status AS was, e.claimed_by AS was_by, coalesce(e.retry_at, e.time) AS due,
                    {priority} AS priority
             FROM lease_events e JOIN leases l ON l.id = e.lease_id
             WHERE e.status = 'UNDONE' AND coalesce(e.retry_at, e.time) <= statement_timestamp()
               AND NOT (SELECT paused FROM gate)
               {rules}
             ORDER BY coalesce(e.retry_at, e.time)
             LIMIT $1
             FOR UPDATE OF e SKIP LOCKED FOR SHARE OF l SKIP LOCKED
         ), expired AS (
             SELECT e.id, e.status AS was, e.claimed_by AS was_by, coalesce(e.retry_at, e.time) AS due,
                    {priority} AS priority
             FROM lease_events e JOIN leases l ON l.id = e.lease_id
             WHERE e.status = 'IN_PROGRESS' AND e.claim_expires_at <= statement_timestamp()
               AND NOT (SELECT paused FROM gate)
               {rules}
             ORDER BY e.claim_expires_at
             LIMIT $1
             FOR UPDATE OF e SKIP LOCKED FOR SHARE OF l SKIP LOCKED
         ), picked AS (
             SELECT * FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) AS both_kinds
             ORDER BY due, priority, id
             LIMIT $1
         ), claimed AS (
             UPDATE lease_events e
             SET status = 'IN_PROGRESS', attempts = e.attempts + 1, claimed_by = $2,
                 claim_expires_at = statement_timestamp() + $3::int8 * interval '1 microsecond',
                 updated_at = statement_timestamp()
             FROM picked WHERE e.id = picked.id AND e.id = ANY (ARRAY(SELECT id FROM picked))
             RETURNING e.lease_id, e.id, e.event_type, e.time, picked.due, e.attempts, picked.was, picked.was_by,
                       statement_timestamp() AS at, e.claim_expires_at, picked.priority
         ), numbered AS (
             SELECT c.*, 'lease:' || c.lease_id AS stream,
                    row_number() OVER (ORDER BY c.due, c.priority, c.id) AS ord
             FROM claimed c
         ), logged AS (
             INSERT INTO log_events (stream, version, type, data, meta)
             SELECT n.stream,
                    (SELECT coalesce(max(l.version), 0) FROM log_events l WHERE l.stream = n.stream)
                      + row_number() OVER (PARTITION BY n.stream ORDER BY n.ord),
                    $5::text, {data}, $4::jsonb
             FROM numbered n ORDER BY n.ord
             RETURNING 1
         )
         -- One row at least: the next due time after this statement's (from
         -- the snapshot it claimed from, so an event falling due meanwhile
         -- is in one answer or the other), and the database's clock read
         -- once the claims and their log rows are written (the filter runs
         -- both first), to sleep until it on the local clock.
         -- With each claim, its lease and reservations as hooks see them,
         -- from the snapshot it claimed from (not a read of their own, a
         -- round trip more before any hook of the batch can start).
         SELECT {HOOK_LEASE_COLUMNS}, {SLOTS_JSON},
                c.lease_id, c.id AS event_id, c.event_type, c.time, c.due, c.attempts, c.was, c.was_by,
                c.at AS claimed_at, c.claim_expires_at, t.now, t.next
         FROM (SELECT clock_timestamp() AS now, {NEXT_DUE} AS next
               WHERE (SELECT count(*) FROM claimed) + (SELECT count(*) FROM logged) >= 0) t
         LEFT JOIN claimed c ON true
         LEFT JOIN leases l ON l.id = c.lease_id
         LEFT JOIN reservations r ON r.lease_id = l.id
         ORDER BY c.lease_id, c.id, r.position",
        data = claimed_data("n")
    )
}

/// A `LeaseEventClaimed` event's data, as serde writes it, for a claimed
/// row `r` of the claim statement: the log is appended by the statement
/// that claims (one round trip, no transaction of its own). The test
/// `claim_log_matches_serde` holds it to [`Event::to_parts`].
fn claimed_data(r: &str) -> String {
    let (expires, at) = (rfc3339(&format!("{r}.claim_expires_at")), rfc3339(&format!("{r}.at")));
    format!(
        "jsonb_build_object('lease', {r}.lease_id, 'event', {r}.id, 'event_type', {r}.event_type,
             'attempt', {r}.attempts, 'claimed_by', $2::text, 'claim_expires_at', {expires}, 'at', {at})
         || CASE WHEN {r}.was = 'IN_PROGRESS' THEN jsonb_build_object('rescued_from', coalesce({r}.was_by, ''))
                 ELSE '{{}}'::jsonb END"
    )
}

/// A timestamptz as chrono's serde writes a `DateTime<Utc>`: RFC 3339 in
/// UTC with `Z`, and a fraction of 3 or 6 digits only when there is one.
pub(super) fn rfc3339(t: &str) -> String {
    let us = format!("(extract(microseconds FROM {t})::int8 % 1000000)");
    format!(
        "(to_char({t} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')
          || CASE WHEN {us} = 0 THEN '' WHEN {us} % 1000 = 0 THEN '.' || lpad(({us} / 1000)::text, 3, '0')
                  ELSE '.' || lpad({us}::text, 6, '0') END || 'Z')"
    )
}

/// The log's name for [`Event::LeaseEventClaimed`].
pub(super) fn claimed_type() -> &'static str {
    static TYPE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TYPE.get_or_init(|| {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let sample = Event::LeaseEventClaimed {
            lease: Uuid::nil(),
            event: Uuid::nil(),
            event_type: LeaseEventType::StartLease,
            attempt: 1,
            claimed_by: String::new(),
            claim_expires_at: at,
            rescued_from: None,
            at,
        };
        sample.to_parts().0
    })
}

/// A claimed row of the claim statement (none in its one row when it
/// claimed nothing), by the names of the claim's own columns (the lease's
/// and reservation's are [`HOOK_LEASE_COLUMNS`]'s).
fn claim_of(r: &tokio_postgres::Row) -> Option<Claim> {
    let event_type: String = r.get::<_, Option<String>>("event_type")?;
    let was: String = r.get("was");
    Some(Claim {
        lease: r.get("lease_id"),
        event: r.get("event_id"),
        event_type: LeaseEventType::parse(&event_type).unwrap_or(LeaseEventType::EndLease),
        time: r.get("time"),
        due: r.get("due"),
        attempt: r.get("attempts"),
        claimed_at: r.get("claimed_at"),
        claim_expires_at: r.get("claim_expires_at"),
        rescued_from: (was == LeaseEventStatus::InProgress.as_str())
            .then(|| r.get::<_, Option<String>>("was_by").unwrap_or_default()),
    })
}

/// The claimed events and their leases as hooks see them, from the claim
/// statement's rows (one per claim and reservation, by lease and claim): a
/// lease's reservations are those of its first claim's rows.
fn claims_and_leases(rows: &[tokio_postgres::Row]) -> (Vec<Claim>, Vec<LeaseRecord>) {
    let mut claims: Vec<Claim> = Vec::new();
    let mut leases: Vec<LeaseRecord> = Vec::new();
    // Whether this claim's rows are its lease's reservations to keep.
    let mut filling = false;
    for r in rows {
        let Some(claim) = claim_of(r) else { continue };
        if claims.last().is_none_or(|c| c.event != claim.event) {
            filling = leases.last().is_none_or(|l| l.id != claim.lease);
            if filling {
                leases.push(lease_of(r));
            }
            claims.push(claim);
        }
        if filling && r.get::<_, Option<Uuid>>("reservation_id").is_some() {
            let lease = leases.last_mut().expect("pushed when filling began");
            lease.reservations.push(reservation_of(r, slots_of(r.get("slots"))));
        }
    }
    (claims, leases)
}

/// A connection one claimer keeps for its claim statements
/// ([`Store::claim_lease_events_kept`]); empty until its first claim.
/// Dropped, the connection goes back to the pool.
#[derive(Default)]
pub struct KeptConnection(Option<crate::conn::Checkout>);

/// Runs the claim statement on `c`: the claims, when to look next, and
/// the claimed events' leases.
async fn claim_on(
    c: &crate::conn::Checkout,
    claimer: &str,
    limit: i64,
    ttl: chrono::Duration,
) -> Result<Claimed, StoreError> {
    let statement = claim_statement();
    // At most a year: a claim's expiry stays a time the database can write.
    let ttl_us = ttl.num_microseconds().unwrap_or(i64::MAX).clamp(0, 365 * 86_400 * 1_000_000);
    let meta = serde_json::to_value(manager_meta(claimer)).expect("meta serializes");
    let event_type = claimed_type();
    let params: Params<'_> = [&limit, &claimer, &ttl_us, &meta, &event_type];
    // One statement, so no transaction of its own: it claims and appends
    // the claims to the log at once. A lost race for a stream's next
    // version (another writer appended to the lease meanwhile) runs it
    // again, as a command would be.
    let mut pauses = crate::tx::backoff();
    let rows = loop {
        match sql::query(c, statement, &params).await.map_err(StoreError::from) {
            Ok(rows) => break rows,
            Err(e) if e.is_transient() => match pauses.next() {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return Err(e),
            },
            Err(e) => return Err(e),
        }
    };
    let first = rows.first().ok_or_else(|| berth_core::Error::internal("the claim statement: no row"))?;
    let next = NextDue { now: first.get("now"), due: first.get("next") };
    let (mut claims, leases) = claims_and_leases(&rows);
    claims.sort_by_key(|c| (c.due, lease_event::priority(c.event_type), c.event));
    Ok(Claimed { claims, next, leases })
}

/// The claim statement, built once (the loop runs it several times a
/// second; its text is the key of each connection's prepared statements).
fn claim_statement() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(claim_sql)
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
        Ok(self.claim_lease_events_then_next(claimer, limit, ttl).await?.0)
    }

    /// As [`Store::claim_lease_events`], with when the manager must look
    /// next, decided by the same statement: an event that falls due after
    /// the claim's snapshot is in the next due time, never in neither (a
    /// separate look after the claim missed those due between the two).
    pub async fn claim_lease_events_then_next(
        &self,
        claimer: &str,
        limit: i64,
        ttl: chrono::Duration,
    ) -> Result<(Vec<Claim>, NextDue), berth_core::Error> {
        let claimed = self.claim_lease_events_for_hooks(claimer, limit, ttl).await?;
        Ok((claimed.claims, claimed.next))
    }

    /// As [`Store::claim_lease_events_then_next`], with the claimed events'
    /// leases as hooks see them (without their lease events), read by the
    /// same statement from the snapshot it claimed from:
    /// [`Store::hook_contexts_of`] completes them.
    pub async fn claim_lease_events_for_hooks(
        &self,
        claimer: &str,
        limit: i64,
        ttl: chrono::Duration,
    ) -> Result<Claimed, berth_core::Error> {
        let c = self.client().await?;
        Ok(claim_on(&c, claimer, limit, ttl).await?)
    }

    /// As [`Store::claim_lease_events_for_hooks`], on the connection
    /// `kept` holds (taken from the pool at its first claim, and again
    /// after an error). A claim on a pooled connection waited for its
    /// checkout and, the pool handing out its connections in turn, ran
    /// where the claim statement was not prepared yet (a parse and plans of
    /// their own on every connection of the pool).
    pub async fn claim_lease_events_kept(
        &self,
        kept: &mut KeptConnection,
        claimer: &str,
        limit: i64,
        ttl: chrono::Duration,
    ) -> Result<Claimed, berth_core::Error> {
        let c = match kept.0.take() {
            Some(c) if !c.is_closed() => {
                c.rearm();
                c
            }
            _ => self.client().await?,
        };
        match claim_on(&c, claimer, limit, ttl).await {
            Ok(claimed) => {
                kept.0 = Some(c);
                Ok(claimed)
            }
            // The connection may be the cause (a server that dropped it,
            // which the client may not have noticed yet): it is closed,
            // not handed back for the next claim or request to fail on.
            Err(e) => {
                drop(c.take());
                Err(e.into())
            }
        }
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
            let rows = lock::claimed_events(tx, &ids, claimer).await?;
            let mut kept = Vec::new();
            let mut out = Vec::new();
            for r in rows {
                let (lease, event) = (r.lease_id, r.id);
                if events.contains(&(event, r.attempts)) {
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
}
