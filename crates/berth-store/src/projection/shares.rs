//! Applying sharing's events: the projects a lease is shared with, and the
//! `on_update` calls owed to plugins when a started lease's sharing changed.

use berth_core::Event;

use crate::client::GenericClient;
use crate::StoreError;

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::LeaseShared { id, projects, hooks, at } => {
            c.execute("DELETE FROM lease_shares WHERE lease_id = $1", &[id]).await?;
            c.execute(
                "INSERT INTO lease_shares (lease_id, project_id) SELECT $1, p FROM unnest($2::text[]) AS p",
                &[id, projects],
            )
            .await?;
            let (reservations, ids): (Vec<_>, Vec<_>) = hooks.iter().map(|(r, h)| (*r, *h)).unzip();
            if !ids.is_empty() {
                c.execute(
                    "INSERT INTO update_hooks (id, lease_id, reservation_id, created_at)
                     SELECT h, $2, r, $4 FROM unnest($1::uuid[], $3::uuid[]) AS u(h, r)",
                    &[&ids, id, &reservations, at],
                )
                .await?;
            }
        }
        Event::UpdateHookFinished { id, .. } => {
            c.execute("DELETE FROM update_hooks WHERE id = $1", &[id]).await?;
        }
        _ => unreachable!("not a sharing event"),
    }
    Ok(())
}

/// A deleted lease's shares and owed calls go with it (explicitly, not by
/// cascade: replay's scratch tables have no foreign keys).
pub(super) async fn lease_deleted(c: &impl GenericClient, id: &uuid::Uuid) -> Result<(), StoreError> {
    c.execute("DELETE FROM lease_shares WHERE lease_id = $1", &[id]).await?;
    c.execute("DELETE FROM update_hooks WHERE lease_id = $1", &[id]).await?;
    Ok(())
}
