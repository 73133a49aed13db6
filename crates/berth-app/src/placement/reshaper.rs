//! The reshaper: inventories and allocations of several providers and
//! consumers replaced together, in one transaction.

use std::collections::BTreeMap;

use berth_core::Inventory;
use berth_store::commands::ReshapeInventory;
use uuid::Uuid;

use super::allocations::Claim;
use super::{May, Rule};
use crate::{App, Error};

/// The reshaper, over one [`App`].
pub struct Reshaper<'a> {
    pub(crate) app: &'a App,
}

/// A provider's inventories as a reshape leaves them.
#[derive(Debug, Clone)]
pub struct ProviderInventories {
    pub provider: Uuid,
    pub expected_generation: i64,
    pub inventories: BTreeMap<String, Inventory>,
}

impl Reshaper<'_> {
    /// Replaces the providers' inventories and the consumers' allocations
    /// (held from now on) at once: all of it, or none.
    pub async fn reshape(
        &self,
        may: &May,
        inventories: Vec<ProviderInventories>,
        claims: Vec<Claim>,
    ) -> Result<(), Error> {
        let meta = may.grants(Rule::Reshape)?;
        let now = self.app.store.now().await?;
        let inventories = inventories
            .into_iter()
            .map(|p| ReshapeInventory {
                provider: p.provider,
                expected_generation: p.expected_generation,
                inventories: p.inventories,
            })
            .collect();
        let consumers = claims.into_iter().map(|c| c.held_from(now)).collect();
        Ok(self.app.store.reshape(meta, inventories, consumers).await?)
    }
}
