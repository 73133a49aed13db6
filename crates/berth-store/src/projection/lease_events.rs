//! Applying the manager's events: claims, attempts and outcomes of lease
//! events, and hosts held back at a lease's end.

use berth_core::Event;
use deadpool_postgres::GenericClient;

use crate::{sql, StoreError};

/// The row a claim leaves. The claim statement
/// (`commands::lease_events`) writes the same columns for a whole batch.
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

/// Applies a run of events of one batchable kind on distinct rows: the same
/// rows as applying them one by one.
pub(super) async fn apply_run(c: &impl GenericClient, run: &[&Event]) -> Result<(), StoreError> {
    use chrono::{DateTime, Utc};
    use uuid::Uuid;
    let mut ids: Vec<Uuid> = Vec::with_capacity(run.len());
    let mut leases: Vec<Uuid> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut errors: Vec<Option<String>> = Vec::new();
    let mut times: Vec<DateTime<Utc>> = Vec::new();
    let mut ats: Vec<DateTime<Utc>> = Vec::new();
    let mut flags: Vec<bool> = Vec::new();
    for e in run {
        match e {
            Event::LeaseEventFinished { event, status, error, at, .. } => {
                ids.push(*event);
                texts.push(status.as_str().to_string());
                errors.push(error.clone());
                ats.push(*at);
            }
            Event::LeaseEventRetrying { event, error, retry_at, at, .. } => {
                ids.push(*event);
                errors.push(Some(error.clone()));
                times.push(*retry_at);
                ats.push(*at);
            }
            Event::ReservationStatusChanged { lease, reservation, status, at } => {
                ids.push(*reservation);
                leases.push(*lease);
                texts.push(status.as_str().to_string());
                ats.push(*at);
            }
            Event::LeaseStatusChanged { id, status, degraded, at } => {
                ids.push(*id);
                texts.push(status.as_str().to_string());
                flags.push(*degraded);
                ats.push(*at);
            }
            _ => unreachable!("not a batchable event"),
        }
    }
    match &run[0] {
        Event::LeaseEventFinished { .. } => {
            sql::execute(
                c,
                "UPDATE lease_events e SET status = u.status, last_error = coalesce(u.error, e.last_error),
                        retry_at = NULL, claim_expires_at = NULL, updated_at = u.at
                 FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, status, error, at)
                 WHERE e.id = u.id",
                &[&ids, &texts, &errors, &ats],
            )
            .await?;
        }
        Event::LeaseEventRetrying { .. } => {
            sql::execute(
                c,
                "UPDATE lease_events e SET status = 'UNDONE', last_error = u.error, retry_at = u.retry_at,
                        claim_expires_at = NULL, updated_at = u.at
                 FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS u(id, error, retry_at, at)
                 WHERE e.id = u.id",
                &[&ids, &errors, &times, &ats],
            )
            .await?;
        }
        Event::ReservationStatusChanged { .. } => {
            sql::execute(
                c,
                "UPDATE reservations r SET status = u.status, updated_at = u.at
                 FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, lease, status, at)
                 WHERE r.id = u.id AND r.lease_id = u.lease",
                &[&ids, &leases, &texts, &ats],
            )
            .await?;
        }
        Event::LeaseStatusChanged { .. } => {
            sql::execute(
                c,
                "UPDATE leases l SET status = u.status, degraded = u.degraded, updated_at = u.at
                 FROM unnest($1::uuid[], $2::text[], $3::bool[], $4::timestamptz[]) AS u(id, status, degraded, at)
                 WHERE l.id = u.id",
                &[&ids, &texts, &flags, &ats],
            )
            .await?;
        }
        _ => unreachable!("not a batchable event"),
    }
    Ok(())
}
