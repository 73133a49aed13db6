//! Making hosts unusable or usable again, and healing what they held, in
//! one transaction; the retry of heals that found no host
//! (`commands::leases::heal` does the re-placing).
//!
//! A host is unusable while an admin (or a plugin's report, recorded by the
//! manager) has it disabled, or while its provider carries Nova's
//! `COMPUTE_STATUS_DISABLED` trait (set through `/placement`, in
//! `commands::providers`). The caller says what each reservation to heal
//! needs (`Demands`, from its plugin, asked before the transaction: a
//! plugin may be outside); a reservation it could not ask about is marked.

use std::collections::BTreeSet;

use berth_core::error::ErrorCode;
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use super::leases::heal::{heal_in, heal_locked, lock_all, to_heal, Changed};
pub use super::leases::heal::{Demands, HealOutcome};
use super::now;
use super::providers::replace_traits_in;
use crate::Store;

/// A reservation a heal would look at, for its plugin to say what it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ToHeal {
    pub reservation: Uuid,
    pub resource_type: String,
    pub params: serde_json::Value,
}

impl Store {
    /// The reservations a heal would look at: those of leases not ended
    /// holding an unusable host (or one of `down`), or missing resources.
    pub async fn reservations_to_heal(&self, down: &[Uuid]) -> Result<Vec<ToHeal>, Error> {
        let c = self.client().await?;
        let at = now(&c).await?;
        Ok(to_heal(&c, Changed { down, ..Default::default() }, at)
            .await?
            .into_iter()
            .map(|(reservation, resource_type, params)| ToHeal { reservation, resource_type, params })
            .collect())
    }

    /// Disables a host (`reason`: who says so, e.g. "admin") or enables it
    /// again, and heals in the same transaction: the reservations holding a
    /// disabled host move to others; those missing resources are tried
    /// again (an enabled host frees them). Nothing moves back by itself.
    pub async fn set_host_disabled(
        &self,
        meta: &EventMeta,
        id: Uuid,
        disabled: bool,
        reason: Option<String>,
        demands: &Demands,
    ) -> Result<Vec<HealOutcome>, Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let Some(row) = tx.query_opt("SELECT disabled FROM hosts WHERE provider_uuid = $1", &[&id]).await? else {
                return Err(Error::not_found(ErrorCode::HostNotFound, format!("no host {id}")).into());
            };
            let was: bool = row.get("disabled");
            let first = if was == disabled {
                Vec::new()
            } else {
                vec![Event::HostDisabled { provider: id, disabled, reason: reason.clone().filter(|_| disabled), at }]
            };
            let one = [id];
            let changed = if disabled {
                Changed { down: &one, ..Default::default() }
            } else {
                Changed { up: &one, ..Default::default() }
            };
            heal_locked(tx, meta, first, changed, demands, at, self.placing()).await
        })
    }

    /// Heals what waits: reservations still on unusable hosts, or missing
    /// resources, for which a host may have freed since. The manager calls
    /// it on every sweep while [`Store::reservations_to_heal`] finds some.
    pub async fn heal(&self, meta: &EventMeta, demands: &Demands) -> Result<Vec<HealOutcome>, Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            heal_locked(tx, meta, Vec::new(), Changed::default(), demands, at, self.placing()).await
        })
    }
}

/// The trait Nova sets on a disabled compute service's provider.
pub const COMPUTE_STATUS_DISABLED: &str = "COMPUTE_STATUS_DISABLED";

impl Store {
    /// Replaces a provider's traits (as [`Store::replace_traits`]); when
    /// that gives an enrolled host Nova's `COMPUTE_STATUS_DISABLED` trait
    /// or takes it away, heals in the same transaction, as disabling or
    /// enabling the host does. Returns the new generation.
    pub async fn replace_traits_healing(
        &self,
        meta: &EventMeta,
        uuid: Uuid,
        expected_generation: Option<i64>,
        traits: BTreeSet<String>,
        demands: &Demands,
    ) -> Result<(i64, Vec<HealOutcome>), Error> {
        crate::tx::command!(self, |tx| {
            let row = tx
                .query_opt(
                    "SELECT EXISTS (SELECT 1 FROM provider_traits WHERE provider_uuid = $1 AND trait = $2) AS disabled
                     FROM hosts WHERE provider_uuid = $1",
                    &[&uuid, &COMPUTE_STATUS_DISABLED],
                )
                .await?;
            let disabled = traits.contains(COMPUTE_STATUS_DISABLED);
            if row.is_none_or(|r| r.get::<_, bool>("disabled") == disabled) {
                Ok((replace_traits_in(tx, meta, uuid, expected_generation, &traits).await?, Vec::new()))
            } else {
                let at = now(tx).await?;
                let one = [uuid];
                let changed = if disabled {
                    Changed { down: &one, ..Default::default() }
                } else {
                    Changed { up: &one, ..Default::default() }
                };
                let locked = lock_all(tx, changed, demands, at, self.placing()).await?;
                let generation = replace_traits_in(tx, meta, uuid, expected_generation, &traits).await?;
                Ok((generation, heal_in(tx, meta, &locked, demands).await?))
            }
        })
    }
}
