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
    let mut columns = RunColumns::default();
    for e in run {
        columns.push(e);
    }
    columns.write(c, run[0]).await
}

/// A run's events as the columns of the statement that writes them.
#[derive(Default)]
struct RunColumns {
    ids: Vec<uuid::Uuid>,
    leases: Vec<uuid::Uuid>,
    texts: Vec<String>,
    errors: Vec<Option<String>>,
    times: Vec<chrono::DateTime<chrono::Utc>>,
    ats: Vec<chrono::DateTime<chrono::Utc>>,
    flags: Vec<bool>,
}

impl RunColumns {
    fn push(&mut self, e: &Event) {
        match e {
            Event::LeaseEventFinished { event, status, error, at, .. } => {
                self.ids.push(*event);
                self.texts.push(status.as_str().to_string());
                self.errors.push(error.clone());
                self.ats.push(*at);
            }
            Event::LeaseEventRetrying { event, error, retry_at, at, .. } => {
                self.ids.push(*event);
                self.errors.push(Some(error.clone()));
                self.times.push(*retry_at);
                self.ats.push(*at);
            }
            Event::ReservationStatusChanged { lease, reservation, status, at } => {
                self.ids.push(*reservation);
                self.leases.push(*lease);
                self.texts.push(status.as_str().to_string());
                self.ats.push(*at);
            }
            Event::LeaseStatusChanged { id, status, degraded, at } => {
                self.ids.push(*id);
                self.texts.push(status.as_str().to_string());
                self.flags.push(*degraded);
                self.ats.push(*at);
            }
            _ => unreachable!("not a batchable event"),
        }
    }

    /// Writes the run, of the kind of `first`, in one statement.
    async fn write(&self, c: &impl GenericClient, first: &Event) -> Result<(), StoreError> {
        match first {
            Event::LeaseEventFinished { .. } => {
                sql::execute(
                    c,
                    "UPDATE lease_events e SET status = u.status, last_error = coalesce(u.error, e.last_error),
                            retry_at = NULL, claim_expires_at = NULL, updated_at = u.at
                     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, status, error, at)
                     WHERE e.id = u.id",
                    &[&self.ids, &self.texts, &self.errors, &self.ats],
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
                    &[&self.ids, &self.errors, &self.times, &self.ats],
                )
                .await?;
            }
            Event::ReservationStatusChanged { .. } => {
                sql::execute(
                    c,
                    "UPDATE reservations r SET status = u.status, updated_at = u.at
                     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[]) AS u(id, lease, status, at)
                     WHERE r.id = u.id AND r.lease_id = u.lease",
                    &[&self.ids, &self.leases, &self.texts, &self.ats],
                )
                .await?;
            }
            Event::LeaseStatusChanged { .. } => {
                sql::execute(
                    c,
                    "UPDATE leases l SET status = u.status, degraded = u.degraded, updated_at = u.at
                     FROM unnest($1::uuid[], $2::text[], $3::bool[], $4::timestamptz[]) AS u(id, status, degraded, at)
                     WHERE l.id = u.id",
                    &[&self.ids, &self.texts, &self.flags, &self.ats],
                )
                .await?;
            }
            _ => unreachable!("not a batchable event"),
        }
        Ok(())
    }
}
