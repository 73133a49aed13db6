//! Resource providers: list, show, create, rename or re-parent, delete.

pub use berth_store::commands::{NewProvider, ProviderUpdate};
pub use berth_store::queries::placement::ProviderFilter;
use uuid::Uuid;

use super::{May, Provider, Rule};
use crate::{App, Error};

/// Placement's provider use cases, over one [`App`].
pub struct Providers<'a> {
    pub(crate) app: &'a App,
}

impl Providers<'_> {
    /// The providers `filter` selects.
    pub async fn list(&self, may: &May, filter: &ProviderFilter) -> Result<Vec<Provider>, Error> {
        may.grants(Rule::ProvidersList)?;
        Ok(self.app.store.placement_providers(filter).await?)
    }

    /// The provider `uuid`.
    pub async fn show(&self, may: &May, uuid: Uuid) -> Result<Provider, Error> {
        may.grants(Rule::ProvidersShow)?;
        Ok(self.app.store.placement_provider(uuid).await?)
    }

    /// Creates the provider `new`; its uuid.
    pub async fn create(&self, may: &May, new: NewProvider) -> Result<Uuid, Error> {
        let meta = may.grants(Rule::ProvidersCreate)?;
        Ok(self.app.store.create_provider(meta, new).await?)
    }

    /// Renames or re-parents the provider `uuid`; the provider after.
    pub async fn update(&self, may: &May, uuid: Uuid, update: ProviderUpdate) -> Result<Provider, Error> {
        let meta = may.grants(Rule::ProvidersUpdate)?;
        self.app.store.update_provider(meta, uuid, update).await?;
        Ok(self.app.store.placement_provider(uuid).await?)
    }

    /// Deletes the provider `uuid` (no children, no allocations).
    pub async fn delete(&self, may: &May, uuid: Uuid) -> Result<(), Error> {
        let meta = may.grants(Rule::ProvidersDelete)?;
        Ok(self.app.store.delete_provider(meta, uuid).await?)
    }
}
