//! Consumers' allocations: Placement's claim (one consumer's allocations
//! replaced at once, or several consumers' together), a consumer's and a
//! provider's allocations now, and a consumer's release. A claim holds
//! from now (the database's), open-ended.

use berth_core::event::Allocation;
use berth_core::Window;
use berth_store::commands::ConsumerAllocations;
pub use berth_store::commands::GenerationCheck;
pub use berth_store::queries::placement::{ConsumerView, ProviderAllocation};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{May, Provider, Rule};
use crate::{App, Error};

/// Placement's allocation use cases, over one [`App`].
pub struct Allocations<'a> {
    pub(crate) app: &'a App,
}

/// One consumer's allocations as a claim asks for them: empty releases
/// what it holds.
#[derive(Debug, Clone)]
pub struct Claim {
    pub consumer: Uuid,
    pub project_id: String,
    pub user_id: String,
    /// `None` keeps an existing consumer's type.
    pub consumer_type: Option<String>,
    pub generation: GenerationCheck,
    /// In the order asked (which the answers keep).
    pub holds: Vec<Hold>,
}

/// An amount of one class on one provider.
#[derive(Debug, Clone)]
pub struct Hold {
    pub provider: Uuid,
    pub resource_class: String,
    pub used: i64,
}

impl Claim {
    /// The command's allocations, held from `now` on.
    pub(crate) fn held_from(self, now: DateTime<Utc>) -> ConsumerAllocations {
        let window = Window::from(now);
        let allocations = self
            .holds
            .into_iter()
            .map(|h| Allocation { provider: h.provider, resource_class: h.resource_class, used: h.used, window })
            .collect();
        ConsumerAllocations {
            consumer: self.consumer,
            project_id: self.project_id,
            user_id: self.user_id,
            consumer_type: self.consumer_type,
            generation: self.generation,
            allocations,
        }
    }
}

impl Allocations<'_> {
    /// What the consumer holds now; `None` for a consumer Placement does
    /// not know.
    pub async fn of_consumer(&self, may: &May, consumer: Uuid) -> Result<Option<ConsumerView>, Error> {
        may.grants(Rule::AllocationsList)?;
        Ok(self.app.store.consumer_now(consumer).await?)
    }

    /// The provider `uuid` and what is allocated on it now.
    pub async fn of_provider(&self, may: &May, uuid: Uuid) -> Result<(Provider, Vec<ProviderAllocation>), Error> {
        may.grants(Rule::ProviderAllocations)?;
        let provider = self.app.store.placement_provider(uuid).await?;
        Ok((provider, self.app.store.provider_allocations_now(uuid).await?))
    }

    /// Replaces one consumer's allocations (`PUT`): all of it fits at every
    /// instant from now on, or nothing is written.
    pub async fn claim(&self, may: &May, claim: Claim) -> Result<(), Error> {
        let meta = may.grants(Rule::AllocationsUpdate)?;
        let now = self.app.store.now().await?;
        Ok(self.app.store.replace_allocations(meta, vec![claim.held_from(now)]).await?)
    }

    /// Replaces several consumers' allocations together (`POST`): all of
    /// them, or none.
    pub async fn claim_many(&self, may: &May, claims: Vec<Claim>) -> Result<(), Error> {
        let meta = may.grants(Rule::AllocationsManage)?;
        let now = self.app.store.now().await?;
        let commands = claims.into_iter().map(|c| c.held_from(now)).collect();
        Ok(self.app.store.replace_allocations(meta, commands).await?)
    }

    /// Releases everything the consumer holds; not found when it holds nothing.
    pub async fn delete(&self, may: &May, consumer: Uuid) -> Result<(), Error> {
        let meta = may.grants(Rule::AllocationsDelete)?;
        Ok(self.app.store.delete_allocations(meta, consumer).await?)
    }
}
