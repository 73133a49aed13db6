//! Reads of sharing: the projects leases are shared with (for hooks), the
//! leases shared with a project (its "shared with you" list), and whether
//! a project may draw from a reservation it does not own.

use std::collections::HashMap;

use berth_core::Error;
use uuid::Uuid;

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

/// The projects leases are shared with, by lease.
pub(crate) type Shares = HashMap<Uuid, Vec<String>>;

/// The projects each of `leases` is shared with, sorted (a lease shared
/// with none is not in the answer).
pub(crate) async fn shares_of(c: &impl GenericClient, leases: &[Uuid]) -> Result<Shares, Error> {
    let rows = c
        .query(
            "SELECT lease_id, project_id FROM lease_shares WHERE lease_id = ANY($1) ORDER BY lease_id, project_id",
            &[&leases],
        )
        .await
        .map_err(StoreError::from)?;
    let mut out = Shares::new();
    for r in &rows {
        out.entry(r.get("lease_id")).or_default().push(r.get("project_id"));
    }
    Ok(out)
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
