//! A provider's aggregates: shown, or replaced as a whole.

use std::collections::BTreeSet;

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use uuid::Uuid;

use super::{May, Provider, Rule};
use crate::{App, Error};

/// Placement's aggregate use cases, over one [`App`].
pub struct Aggregates<'a> {
    pub(crate) app: &'a App,
}

impl Aggregates<'_> {
    /// The provider `uuid` and its aggregates.
    pub async fn of_provider(&self, may: &May, uuid: Uuid) -> Result<(Provider, Vec<Uuid>), Error> {
        may.grants(Rule::AggregatesList)?;
        let provider = self.app.store.placement_provider(uuid).await?;
        Ok((provider, self.app.store.provider_aggregates(uuid).await?))
    }

    /// Replaces the aggregates of `provider` (as found), made against the
    /// generation `expected` when the client sent one; `bump`: the change
    /// moves the provider's generation on. The generation after.
    pub async fn replace(
        &self,
        may: &May,
        provider: &Provider,
        expected: Option<i64>,
        aggregates: BTreeSet<Uuid>,
        bump: bool,
    ) -> Result<i64, Error> {
        let meta = may.grants(Rule::AggregatesUpdate)?;
        if let Some(expected) = expected.filter(|g| *g != provider.generation) {
            let refusal =
                Refusal::ProviderGeneration { provider: provider.uuid, expected, actual: provider.generation };
            return Err(berth_core::Error::refused(ErrorKind::Conflict, ErrorCode::ConcurrentUpdate, refusal).into());
        }
        Ok(self.app.store.replace_aggregates(meta, provider.uuid, expected, aggregates, bump).await?)
    }
}
