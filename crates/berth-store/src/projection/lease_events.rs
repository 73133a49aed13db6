//! Applying the manager's events: claims, attempts and outcomes of lease
//! events, and hosts held back at a lease's end.

use berth_core::Event;
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::{sql, StoreError};

/// The row a claim leaves. The claim statement
/// (`commands::lease_events::claim`) writes the same columns for a whole batch.
pub(crate) const CLAIM: &str = "UPDATE lease_events SET status = 'IN_PROGRESS', attempts = $2, claimed_by = $3,
        claim_expires_at = $4, updated_at = $5
     WHERE id = $1";

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::LeaseEventClaimed { event, attempt, claimed_by, claim_expires_at, at, .. } => {
            sql::execute(c, CLAIM, &[event, attempt, claimed_by, claim_expires_at, at]).await?;
        }
        Event::LeaseEventClaimRenewed { event, claim_expires_at, at, .. } => {
            sql::execute(
                c,
                "UPDATE lease_events SET claim_expires_at = $2, updated_at = $3 WHERE id = $1",
                &[event, claim_expires_at, at],
            )
            .await?;
        }
        Event::LeaseEventRetrying { event, error, retry_at, at, .. } => {
            sql::execute(
                c,
                "UPDATE lease_events SET status = 'UNDONE', last_error = $2, retry_at = $3, claim_expires_at = NULL,
                        updated_at = $4
                 WHERE id = $1",
                &[event, error, retry_at, at],
            )
            .await?;
        }
        Event::LeaseEventFinished { event, status, error, at, .. } => {
            // A success keeps the last error of an earlier attempt: it says
            // what the retries were about.
            sql::execute(
                c,
                "UPDATE lease_events SET status = $2, last_error = coalesce($3, last_error), retry_at = NULL,
                        claim_expires_at = NULL, updated_at = $4
                 WHERE id = $1",
                &[event, &status.as_str(), error, at],
            )
            .await?;
        }
        Event::LeaseEventRetried { event, at, .. } => {
            // Due at once, from its first attempt; the last error stays
            // until an attempt says otherwise.
            sql::execute(
                c,
                "UPDATE lease_events SET status = 'UNDONE', attempts = 0, retry_at = $2, claimed_by = NULL,
                        claim_expires_at = NULL, updated_at = $2
                 WHERE id = $1",
                &[event, at],
            )
            .await?;
        }
        Event::LeaseEventCancelled { event, at, .. } => {
            sql::execute(
                c,
                "UPDATE lease_events SET status = 'CANCELLED', retry_at = NULL, updated_at = $2 WHERE id = $1",
                &[event, at],
            )
            .await?;
        }
        Event::LeaseEventFired { event, at, .. } => {
            sql::execute(c, "UPDATE lease_events SET retry_at = $2, updated_at = $2 WHERE id = $1", &[event, at])
                .await?;
        }
        Event::ManagerPaused { user_id, project_id, at } | Event::ManagerResumed { user_id, project_id, at } => {
            let paused = matches!(event, Event::ManagerPaused { .. });
            sql::execute(
                c,
                "UPDATE manager_state SET paused = $1, changed_at = $2, changed_by_user = $3, changed_by_project = $4",
                &[&paused, at, user_id, project_id],
            )
            .await?;
        }
        Event::HostHeld { provider, pool, until, lease, at } => {
            sql::execute(
                c,
                "INSERT INTO host_holds (provider_uuid, pool, until, lease_id, created_at) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (provider_uuid) DO UPDATE SET pool = $2, until = $3, lease_id = $4, created_at = $5",
                &[provider, pool, until, lease, at],
            )
            .await?;
        }
        Event::HostHoldReleased { provider, .. } => {
            sql::execute(c, "DELETE FROM host_holds WHERE provider_uuid = $1", &[provider]).await?;
        }
        _ => unreachable!("not a manager event"),
    }
    Ok(())
}

/// The row a batchable event writes, if it is one: runs of events of one
/// kind on distinct rows are applied by one statement.
pub(super) fn batch_key(event: &Event) -> Option<(u8, uuid::Uuid)> {
    match event {
        Event::LeaseEventFinished { event, .. } => Some((0, *event)),
        Event::LeaseEventRetrying { event, .. } => Some((1, *event)),
        Event::ReservationStatusChanged { reservation, .. } => Some((2, *reservation)),
        Event::LeaseStatusChanged { id, .. } => Some((3, *id)),
        _ => None,
    }
}

/// A run's values, column by column (each kind fills the columns it uses).
#[derive(Default)]
struct Columns {
    ids: Vec<Uuid>,
    leases: Vec<Uuid>,
    texts: Vec<String>,
    errors: Vec<Option<String>>,
    times: Vec<DateTime<Utc>>,
    ats: Vec<DateTime<Utc>>,
    flags: Vec<bool>,
}

impl Columns {
    fn of(run: &[&Event]) -> Columns {
        let mut k = Columns { ids: Vec::with_capacity(run.len()), ..Columns::default() };
        for e in run {
            match e {
                Event::LeaseEventFinished { event, status, error, at, .. } => {
                    k.ids.push(*event);
                    k.texts.push(status.as_str().to_string());
                    k.errors.push(error.clone());
                    k.ats.push(*at);
                }
                Event::LeaseEventRetrying { event, error, retry_at, at, .. } => {
                    k.ids.push(*event);
                    k.errors.push(Some(error.clone()));
                    k.times.push(*retry_at);
                    k.ats.push(*at);
                }
                Event::ReservationStatusChanged { lease, reservation, status, at } => {
                    k.ids.push(*reservation);
                    k.leases.push(*lease);
                    k.texts.push(status.as_str().to_string());
                    k.ats.push(*at);
                }
                Event::LeaseStatusChanged { id, status, degraded, at } => {
                    k.ids.push(*id);
                    k.texts.push(status.as_str().to_string());
                    k.flags.push(*degraded);
                    k.ats.push(*at);
                }
                _ => unreachable!("not a batchable event"),
            }
        }
        k
    }
}

/// Applies a run of events of one batchable kind on distinct rows: the same
/// rows as applying them one by one.
pub(super) async fn apply_run(c: &impl GenericClient, run: &[&Event]) -> Result<(), StoreError> {
    let k = Columns::of(run);
    let (statement, params): (&str, [&(dyn ToSql + Sync); 4]) = match &run[0] {
        Event::LeaseEventFinished { .. } => (
            "UPDATE lease_events e SET status = u.status, last_error = coalesce(u.error, e.last_error),
                    retry_at = NULL, claim_expires_at = NULL, updated_at = u.at
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, status, error, at)
             WHERE e.id = u.id",
            [&k.ids, &k.texts, &k.errors, &k.ats],
        ),
        Event::LeaseEventRetrying { .. } => (
            "UPDATE lease_events e SET status = 'UNDONE', last_error = u.error, retry_at = u.retry_at,
                    claim_expires_at = NULL, updated_at = u.at
             FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS u(id, error, retry_at, at)
             WHERE e.id = u.id",
            [&k.ids, &k.errors, &k.times, &k.ats],
        ),
        Event::ReservationStatusChanged { .. } => (
            "UPDATE reservations r SET status = u.status, updated_at = u.at
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, lease, status, at)
             WHERE r.id = u.id AND r.lease_id = u.lease",
            [&k.ids, &k.leases, &k.texts, &k.ats],
        ),
        Event::LeaseStatusChanged { .. } => (
            "UPDATE leases l SET status = u.status, degraded = u.degraded, updated_at = u.at
             FROM unnest($1::uuid[], $2::text[], $3::bool[], $4::timestamptz[]) AS u(id, status, degraded, at)
             WHERE l.id = u.id",
            [&k.ids, &k.texts, &k.flags, &k.ats],
        ),
        _ => unreachable!("not a batchable event"),
    };
    sql::execute(c, statement, &params).await?;
    Ok(())
}
