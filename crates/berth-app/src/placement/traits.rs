//! Traits, and the traits of a provider. Replacing a provider's traits
//! heals what it holds when it becomes unusable (Nova's
//! `COMPUTE_STATUS_DISABLED`), so the reservations' plugins are asked
//! first.

use std::collections::BTreeSet;

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
pub use berth_store::queries::placement::TraitFilter;
use uuid::Uuid;

use super::{May, Provider, Rule};
use crate::{App, Error};

/// Placement's trait use cases, over one [`App`].
pub struct Traits<'a> {
    pub(crate) app: &'a App,
}

impl Traits<'_> {
    /// The traits `filter` selects.
    pub async fn list(&self, may: &May, filter: &TraitFilter) -> Result<Vec<String>, Error> {
        may.grants(Rule::TraitsList)?;
        Ok(self.app.store.traits(filter).await?)
    }

    /// Whether the trait `name` exists.
    pub async fn exists(&self, may: &May, name: &str) -> Result<bool, Error> {
        may.grants(Rule::TraitsShow)?;
        Ok(self.app.store.trait_exists(name).await?)
    }

    /// Makes sure the custom trait `name` exists; whether it was created.
    pub async fn ensure(&self, may: &May, name: &str) -> Result<bool, Error> {
        let meta = may.grants(Rule::TraitsUpdate)?;
        Ok(self.app.store.create_trait(meta, name).await?)
    }

    /// Deletes the custom trait `name` (no provider has it).
    pub async fn delete(&self, may: &May, name: &str) -> Result<(), Error> {
        let meta = may.grants(Rule::TraitsDelete)?;
        Ok(self.app.store.delete_trait(meta, name).await?)
    }

    /// The provider `uuid` and its traits.
    pub async fn of_provider(&self, may: &May, uuid: Uuid) -> Result<(Provider, Vec<String>), Error> {
        may.grants(Rule::ProviderTraitsList)?;
        let provider = self.app.store.placement_provider(uuid).await?;
        Ok((provider, self.app.store.provider_traits(uuid).await?))
    }

    /// Replaces the traits of the provider `uuid`, made against the
    /// generation `expected`; the generation after.
    pub async fn replace(&self, may: &May, uuid: Uuid, expected: i64, traits: BTreeSet<String>) -> Result<i64, Error> {
        let meta = may.grants(Rule::ProviderTraitsUpdate)?;
        let provider = self.app.store.placement_provider(uuid).await?;
        if provider.generation != expected {
            let refusal = Refusal::ProviderGeneration { provider: uuid, expected, actual: provider.generation };
            return Err(berth_core::Error::refused(ErrorKind::Conflict, ErrorCode::ConcurrentUpdate, refusal).into());
        }
        let demands = self.app.heal_demands(&[uuid]).await?;
        let store = &self.app.store;
        Ok(store.replace_traits_healing(meta, uuid, Some(expected), traits, &demands).await?.0)
    }

    /// Removes every trait of the provider `uuid`.
    pub async fn clear(&self, may: &May, uuid: Uuid) -> Result<(), Error> {
        let meta = may.grants(Rule::ProviderTraitsDelete)?;
        let demands = self.app.heal_demands(&[uuid]).await?;
        self.app.store.replace_traits_healing(meta, uuid, None, BTreeSet::new(), &demands).await?;
        Ok(())
    }
}
