//! What is held now: on one provider, by class, or by a project (or one
//! of its users), by class or by consumer type.

use std::collections::BTreeMap;

pub use berth_store::queries::placement::{ConsumerTypeFilter, UsageRow};
use uuid::Uuid;

use super::{May, Provider, Rule};
use crate::{App, Error};

/// Placement's usage use cases, over one [`App`].
pub struct Usages<'a> {
    pub(crate) app: &'a App,
}

impl Usages<'_> {
    /// The provider `uuid` and what it holds now, by class.
    pub async fn of_provider(&self, may: &May, uuid: Uuid) -> Result<(Provider, BTreeMap<String, i64>), Error> {
        may.grants(Rule::ProviderUsages)?;
        let provider = self.app.store.placement_provider(uuid).await?;
        Ok((provider, self.app.store.provider_usages_now(uuid).await?))
    }

    /// What `project` (or its `user`) holds now, grouped by consumer type
    /// as `types` says (`None`: by class only).
    pub async fn of_project(
        &self,
        may: &May,
        (project, user): (&str, Option<&str>),
        types: Option<&ConsumerTypeFilter>,
    ) -> Result<Vec<UsageRow>, Error> {
        may.grants(Rule::Usages)?;
        Ok(self.app.store.usages_now(project, user, types).await?)
    }
}
