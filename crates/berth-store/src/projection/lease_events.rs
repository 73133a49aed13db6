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
