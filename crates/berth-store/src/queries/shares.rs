//! Reads of sharing: the projects leases are shared with (for hooks), the
//! leases shared with a project (its "shared with you" list), and whether
//! a project may draw from a reservation it does not own.

use std::collections::HashMap;

use berth_core::Error;
use uuid::Uuid;

use super::lease_events::HookContext;
use super::leases::{load_leases, Lease, LeaseKey};
use crate::client::GenericClient;
use crate::{Store, StoreError};

/// Whether reservation `$1`'s lease is shared with project `$2`.
pub(crate) const SHARED_WITH: &str = "SELECT 1 AS shared FROM reservations r
     JOIN lease_shares s ON s.lease_id = r.lease_id WHERE r.id = $1 AND s.project_id = $2";

/// Whether reservation `rid` may be drawn from by `project`, which does not
/// own it: its lease is shared with it.
pub(crate) async fn shared_with(c: &impl GenericClient, rid: Uuid, project: &str) -> Result<bool, StoreError> {
    Ok(c.query_opt(SHARED_WITH, &[&rid, &project]).await?.is_some())
}

/// The contexts with the projects their leases are shared with.
pub(crate) async fn with_shares(
    c: &impl GenericClient,
    mut contexts: HashMap<Uuid, HookContext>,
) -> Result<HashMap<Uuid, HookContext>, Error> {
    let ids: Vec<Uuid> = contexts.keys().copied().collect();
    if ids.is_empty() {
        return Ok(contexts);
    }
    let rows = c
        .query(
            "SELECT lease_id, project_id FROM lease_shares WHERE lease_id = ANY($1) ORDER BY lease_id, project_id",
            &[&ids],
        )
        .await
        .map_err(StoreError::from)?;
    for r in &rows {
        if let Some(ctx) = contexts.get_mut(&r.get::<_, Uuid>("lease_id")) {
            ctx.shared_with.push(r.get("project_id"));
        }
    }
    Ok(contexts)
}

impl Store {
    /// The leases shared with `project`, in creation order after `after`,
    /// at most `limit`: a keyset read on `lease_shares_project` and the
    /// leases' own order.
    pub async fn leases_shared_with(
        &self,
        project: &str,
        after: Option<LeaseKey>,
        limit: i64,
    ) -> Result<Vec<Lease>, Error> {
        let c = self.read_client().await?;
        let (after_at, after_id) = (after.map(|k| k.created_at), after.map(|k| k.id));
        let ids: Vec<Uuid> = c
            .query(
                "SELECT l.id FROM lease_shares s JOIN leases l ON l.id = s.lease_id
                 WHERE s.project_id = $1 AND ($2::timestamptz IS NULL OR (l.created_at, l.id) > ($2, $3::uuid))
                 ORDER BY l.created_at, l.id LIMIT $4",
                &[&project, &after_at, &after_id, &limit.clamp(0, i64::MAX)],
            )
            .await
            .map_err(StoreError::from)?
            .iter()
            .map(|r| r.get("id"))
            .collect();
        Ok(load_leases(&c, &ids).await?)
    }

    /// The place of lease `marker` in `project`'s shared list, if it is
    /// shared with it.
    pub async fn shared_lease_key(&self, marker: Uuid, project: &str) -> Result<Option<LeaseKey>, Error> {
        let c = self.read_client().await?;
        let row = c
            .query_opt(
                "SELECT l.created_at FROM lease_shares s JOIN leases l ON l.id = s.lease_id
                 WHERE s.lease_id = $1 AND s.project_id = $2",
                &[&marker, &project],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(row.map(|r| LeaseKey { created_at: r.get("created_at"), id: marker }))
    }
}
