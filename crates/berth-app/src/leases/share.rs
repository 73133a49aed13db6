//! Sharing a lease's reserved capacity with other projects: its owner (or
//! an admin) names them; each may draw from its reservations and sees it
//! in its "shared with you" list, with nothing more of the owner's.

use uuid::Uuid;

use super::{find, Lease, LeaseKey, Leases};
use crate::{Caller, Error, Owner, Rule};

impl Leases<'_> {
    /// Shares lease `id` with `projects` (the whole list; empty: none):
    /// not found unless the caller sees the lease, then its rule, then the
    /// command; the list as it now stands.
    pub async fn share(&self, caller: &Caller<'_>, id: Uuid, projects: &[String]) -> Result<Vec<String>, Error> {
        find(self, caller, id, Rule::LeasesShare).await?;
        let meta = caller.meta(None);
        Ok(self.app.store.share_lease(&meta, id, self.scope(caller), projects).await?)
    }

    /// The caller may list the leases shared with its project (as it may
    /// list its own).
    pub fn may_list_shared(&self, caller: &Caller<'_>) -> Result<(), Error> {
        caller.authorize(Rule::LeasesList, Owner::Caller)
    }

    /// Where a page of the shared list starts: after the lease `marker`,
    /// if it is shared with the caller's project.
    pub async fn shared_marker(&self, caller: &Caller<'_>, marker: Uuid) -> Result<LeaseKey, Error> {
        match self.app.store.shared_lease_key(marker, caller.project_id).await? {
            Some(key) => Ok(key),
            None => Err(super::invalid(format!("marker {marker} is not a lease shared with you"))),
        }
    }

    /// The leases shared with the caller's project, after `after`, at most
    /// `limit`. Whole leases: the edge shows only what a sharer may see.
    pub async fn shared(&self, caller: &Caller<'_>, after: Option<LeaseKey>, limit: i64) -> Result<Vec<Lease>, Error> {
        Ok(self.app.store.leases_shared_with(caller.project_id, after, limit).await?)
    }
}
