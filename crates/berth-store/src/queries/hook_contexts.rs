//! What a hook call knows of its lease ([`HookContext`]), read for the
//! manager: the lease as hooks see it, its providers' names, the other
//! consumers on its whole hosts, and the projects it is shared with.

use std::collections::HashMap;

use berth_core::lease::LeaseRecord;
use berth_core::Error;
use uuid::Uuid;

use super::lease_events::{hook_context, hook_leases, names_and_others, HookContext};
use super::shares::shares_of;
use crate::Store;

/// The contexts of `leases`, each with the projects it is shared with.
fn with_shares(
    contexts: impl Iterator<Item = HookContext>,
    mut shares: super::shares::Shares,
) -> HashMap<Uuid, HookContext> {
    contexts
        .map(|mut ctx| {
            ctx.shared_with = shares.remove(&ctx.lease.id).unwrap_or_default();
            (ctx.lease.id, ctx)
        })
        .collect()
}

impl Store {
    /// What hooks on `leases` need, by lease (a lease that is gone is not
    /// in the answer). Other consumers are read for whole-host reservations
    /// only: those holding the host now, and those that drew from the
    /// lease's own slots (their allocations end with the lease). "Now" is
    /// the database's.
    pub async fn hook_contexts(&self, leases: &[Uuid]) -> Result<HashMap<Uuid, HookContext>, Error> {
        let c = self.client().await?;
        let mut ids = leases.to_vec();
        ids.sort();
        ids.dedup();
        let loaded = hook_leases(&c, &ids).await?;
        let (names, others) = names_and_others(&c, &loaded).await?;
        let shares = shares_of(&c, &ids).await?;
        Ok(with_shares(loaded.into_iter().map(|lease| hook_context(lease, &names, &others)), shares))
    }

    /// As [`Store::hook_contexts`], for leases already read as hooks see
    /// them (by the claim statement): names and others read only when a
    /// reservation has slots; the shares always.
    pub async fn hook_contexts_of(&self, leases: Vec<LeaseRecord>) -> Result<HashMap<Uuid, HookContext>, Error> {
        let slotted = leases.iter().flat_map(|l| &l.reservations).any(|r| !r.slots.is_empty());
        let c = self.client().await?;
        let (names, others) = if slotted { names_and_others(&c, &leases).await? } else { Default::default() };
        let ids: Vec<Uuid> = leases.iter().map(|l| l.id).collect();
        let shares = shares_of(&c, &ids).await?;
        Ok(with_shares(leases.into_iter().map(|lease| hook_context(lease, &names, &others)), shares))
    }
}
