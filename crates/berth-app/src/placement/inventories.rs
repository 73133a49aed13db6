//! A provider's inventories: all of them replaced at once, or one class
//! added, changed or removed. A change names the generation it was made
//! against (Placement's conflict rule), and every inventory must leave
//! something to allocate.

use std::collections::BTreeMap;

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::Inventory;
use berth_store::commands::InventoryChange;
use uuid::Uuid;

use super::{May, Provider, Rule};
use crate::{App, Error};

/// Placement's inventory use cases, over one [`App`].
pub struct Inventories<'a> {
    pub(crate) app: &'a App,
}

/// What an inventory must leave to allocate (Placement's rule changed
/// with its version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// More than nothing: reserved below total.
    Positive,
    /// Nothing or more: reserved at most total.
    NotNegative,
}

impl Capacity {
    fn check(self, provider: Uuid, class: &str, inv: &Inventory) -> Result<(), Error> {
        let capacity = inv.capacity();
        let (bad, zero_allowed) = match self {
            Capacity::Positive => (capacity <= 0, false),
            Capacity::NotNegative => (capacity < 0, true),
        };
        if !bad {
            return Ok(());
        }
        let refusal = Refusal::InventoryCapacity { provider, class: class.to_string(), zero_allowed };
        Err(berth_core::Error::refused(ErrorKind::Invalid, ErrorCode::Invalid, refusal).into())
    }
}

/// The generation the client sent, against the provider as found.
fn at_generation(provider: &Provider, expected: i64) -> Result<(), Error> {
    if expected == provider.generation {
        return Ok(());
    }
    let refusal = Refusal::ProviderGeneration { provider: provider.uuid, expected, actual: provider.generation };
    Err(berth_core::Error::refused(ErrorKind::Conflict, ErrorCode::ConcurrentUpdate, refusal).into())
}

impl Inventories<'_> {
    /// The provider `uuid` and its inventories by class.
    pub async fn of_provider(&self, may: &May, uuid: Uuid) -> Result<(Provider, BTreeMap<String, Inventory>), Error> {
        may.grants_any(&[Rule::InventoriesList, Rule::InventoriesShow])?;
        Ok(self.app.store.provider_with_inventories(uuid).await?)
    }

    /// Adds the inventory of `class` to `provider` (as found); the
    /// provider's generation after.
    pub async fn add(
        &self,
        may: &May,
        provider: &Provider,
        class: &str,
        inv: Inventory,
        rule: Capacity,
    ) -> Result<i64, Error> {
        let meta = may.grants(Rule::InventoriesCreate)?;
        rule.check(provider.uuid, class, &inv)?;
        let change = InventoryChange::Add(inv);
        Ok(self.app.store.change_inventory(meta, provider.uuid, None, class, change).await?)
    }

    /// Changes the inventory of `class`, made against the generation
    /// `expected`; the provider's generation after.
    pub async fn update(
        &self,
        may: &May,
        provider: &Provider,
        expected: i64,
        (class, inv): (&str, Inventory),
        rule: Capacity,
    ) -> Result<i64, Error> {
        let meta = may.grants(Rule::InventoriesUpdate)?;
        at_generation(provider, expected)?;
        rule.check(provider.uuid, class, &inv)?;
        let change = InventoryChange::Update(inv);
        Ok(self.app.store.change_inventory(meta, provider.uuid, Some(expected), class, change).await?)
    }

    /// Replaces all the provider's inventories, made against the generation
    /// `expected`; the provider's generation after.
    pub async fn replace(
        &self,
        may: &May,
        provider: &Provider,
        expected: i64,
        inventories: BTreeMap<String, Inventory>,
        rule: Capacity,
    ) -> Result<i64, Error> {
        let meta = may.grants(Rule::InventoriesUpdate)?;
        at_generation(provider, expected)?;
        for (class, inv) in &inventories {
            rule.check(provider.uuid, class, inv)?;
        }
        Ok(self.app.store.replace_inventories(meta, provider.uuid, Some(expected), inventories).await?)
    }

    /// Removes the inventory of `class` (it must not be allocated).
    pub async fn delete(&self, may: &May, provider: Uuid, class: &str) -> Result<(), Error> {
        let meta = may.grants(Rule::InventoriesDelete)?;
        self.app.store.change_inventory(meta, provider, None, class, InventoryChange::Delete).await?;
        Ok(())
    }

    /// Removes all the provider's inventories (none may be allocated).
    pub async fn delete_all(&self, may: &May, provider: Uuid) -> Result<(), Error> {
        let meta = may.grants(Rule::InventoriesDelete)?;
        self.app.store.replace_inventories(meta, provider, None, BTreeMap::new()).await?;
        Ok(())
    }
}
