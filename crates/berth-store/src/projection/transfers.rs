//! Applying splits and transfers to their projections: a split's new
//! lease (its original's `LeaseUpdated` came just before and gave up the
//! moved slots), the offers in `lease_transfers`, and a lease changing
//! project.

use berth_core::Event;

use crate::client::GenericClient;
use crate::StoreError;

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::LeaseSplit { lease, at, .. } => super::leases::lease_created(c, lease, at).await?,
        Event::LeaseTransferOffered { id, to_project, offered_by, at } => {
            c.execute(
                "INSERT INTO lease_transfers (lease_id, to_project, offered_by, offered_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (lease_id) DO UPDATE SET to_project = $2, offered_by = $3, offered_at = $4",
                &[id, to_project, offered_by, at],
            )
            .await?;
        }
        Event::LeaseTransferWithdrawn { id, .. } => withdrawn(c, id).await?,
        Event::LeaseTransferred { id, to_project, user_id, at, .. } => {
            c.execute(
                "UPDATE leases SET project_id = $2, user_id = $3, updated_at = $4 WHERE id = $1",
                &[id, to_project, user_id, at],
            )
            .await?;
            withdrawn(c, id).await?;
            // Whom to share with is the new owner's to say (and it may have
            // been one of them).
            super::shares::lease_deleted(c, id).await?;
        }
        _ => unreachable!("not a split or a transfer"),
    }
    Ok(())
}

/// The lease's offer, if any, is gone (also when the lease is).
pub(super) async fn withdrawn(c: &impl GenericClient, lease: &uuid::Uuid) -> Result<(), StoreError> {
    c.execute("DELETE FROM lease_transfers WHERE lease_id = $1", &[lease]).await?;
    Ok(())
}
