//! Providers and what hangs off them: inventories, traits, aggregates.
//!
//! Error details use Placement's wording, since Placement's clients are the
//! main readers of these messages.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::{Error, Event, EventMeta, Inventory};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::{now, record};
use crate::refuse::{self, duplicate, invalid, no_class, no_provider};
use crate::{Store, StoreError};

pub struct NewProvider {
    pub uuid: Option<Uuid>,
    pub name: String,
    pub parent: Option<Uuid>,
}

/// A change to a provider's name and/or parent.
pub struct ProviderUpdate {
    pub name: String,
    /// `None`: keep the parent; `Some(None)`: make it a root.
    pub parent: Option<Option<Uuid>>,
    /// Whether a provider that has a parent may get another one or none
    /// (Placement 1.37 and later).
    pub allow_reparent: bool,
}

/// One inventory record changed on its own.
pub enum InventoryChange {
    /// Fails when the class already has an inventory.
    Add(Inventory),
    /// Fails when the class has none.
    Update(Inventory),
    /// Fails when the class has none, or when it is allocated.
    Delete,
}

/// Locks one provider row and returns its generation.
pub(crate) async fn lock_provider(tx: &Transaction<'_>, uuid: Uuid) -> Result<i64, StoreError> {
    match crate::lock::provider(tx, uuid).await? {
        Some(p) => Ok(p.generation),
        None => Err(no_provider(uuid).into()),
    }
}

fn check_generation(uuid: Uuid, expected: Option<i64>, actual: i64) -> Result<(), StoreError> {
    match expected {
        Some(g) if g != actual => {
            Err(refuse::generation(Refusal::ProviderGeneration { provider: uuid, expected: g, actual }).into())
        }
        _ => Ok(()),
    }
}

fn validate_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.chars().count() > 200 {
        return Err(invalid(Refusal::ProviderNameLength));
    }
    Ok(())
}

impl Store {
    pub async fn create_provider(&self, meta: &EventMeta, new: NewProvider) -> Result<Uuid, Error> {
        validate_name(&new.name)?;
        let uuid = new.uuid.unwrap_or_else(Uuid::new_v4);
        if new.parent == Some(uuid) {
            return Err(invalid(Refusal::ParentIsSelf));
        }
        crate::tx::command!(self, |tx| {
            if let Some(parent) = new.parent {
                // Share-lock the parent so it cannot be deleted under us.
                if !crate::lock::parent(tx, parent).await? {
                    return Err(invalid(Refusal::NoParent { parent }).into());
                }
            }
            if tx.query_opt("SELECT 1 FROM providers WHERE uuid = $1", &[&uuid]).await?.is_some() {
                return Err(duplicate(Refusal::ProviderUuidTaken { provider: uuid }).into());
            }
            if tx.query_opt("SELECT 1 FROM providers WHERE name = $1", &[&new.name]).await?.is_some() {
                return Err(duplicate(Refusal::ProviderNameTaken { name: new.name.clone() }).into());
            }
            record(
                tx,
                meta,
                &[Event::ProviderCreated { uuid, name: new.name.clone(), parent: new.parent, at: now(tx).await? }],
            )
            .await?;
            Ok(uuid)
        })
    }

    /// Renames and/or re-parents. Does not bump the generation.
    pub async fn update_provider(&self, meta: &EventMeta, uuid: Uuid, update: ProviderUpdate) -> Result<(), Error> {
        validate_name(&update.name)?;
        crate::tx::command!(self, |tx| {
            let Some(row) = crate::lock::provider(tx, uuid).await? else {
                return Err(no_provider(uuid).into());
            };
            let current: Option<Uuid> = row.parent_uuid;
            let parent = update.parent.unwrap_or(current);
            if parent != current && current.is_some() && !update.allow_reparent {
                return Err(invalid(Refusal::Reparent { unparenting: parent.is_none() }).into());
            }
            if let Some(p) = parent.filter(|p| Some(*p) != current) {
                if p == uuid {
                    return Err(invalid(Refusal::ProviderLoop).into());
                }
                if !crate::lock::parent(tx, p).await? {
                    return Err(invalid(Refusal::NoParent { parent: p }).into());
                }
                let cycle = tx
                    .query_opt(
                        "WITH RECURSIVE subtree(uuid) AS (
                             SELECT $1::uuid UNION ALL
                             SELECT c.uuid FROM providers c JOIN subtree s ON c.parent_uuid = s.uuid)
                         SELECT 1 FROM subtree WHERE uuid = $2",
                        &[&uuid, &p],
                    )
                    .await?
                    .is_some();
                if cycle {
                    return Err(invalid(Refusal::ProviderLoop).into());
                }
            }
            let taken =
                tx.query_opt("SELECT 1 FROM providers WHERE name = $1 AND uuid <> $2", &[&update.name, &uuid]).await?;
            if taken.is_some() {
                return Err(duplicate(Refusal::RenameTaken { name: update.name.clone() }).into());
            }
            record(tx, meta, &[Event::ProviderUpdated { uuid, name: update.name.clone(), parent, at: now(tx).await? }])
                .await?;
            Ok(())
        })
    }

    pub async fn delete_provider(&self, meta: &EventMeta, uuid: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            lock_provider(tx, uuid).await?;
            if tx.query_opt("SELECT 1 FROM providers WHERE parent_uuid = $1 LIMIT 1", &[&uuid]).await?.is_some() {
                return Err(Error::refused(
                    ErrorKind::Conflict,
                    ErrorCode::CannotDeleteParent,
                    Refusal::ParentWithChildren { provider: uuid },
                )
                .into());
            }
            if tx.query_opt(HELD_ON, &[&uuid]).await?.is_some() {
                return Err(Error::refused(
                    ErrorKind::InUse,
                    ErrorCode::ProviderInUse,
                    Refusal::ProviderHasAllocations { provider: uuid },
                )
                .into());
            }
            record(tx, meta, &[Event::ProviderDeleted { uuid }]).await?;
            Ok(())
        })
    }

    /// Replaces the provider's whole inventory; returns the new generation.
    /// A class that is removed must hold no current or future allocation.
    pub async fn replace_inventories(
        &self,
        meta: &EventMeta,
        uuid: Uuid,
        expected_generation: Option<i64>,
        inventories: BTreeMap<String, Inventory>,
    ) -> Result<i64, Error> {
        for (class, inv) in &inventories {
            inv.validate(class)?;
        }
        crate::tx::command!(self, |tx| {
            let generation = lock_provider(tx, uuid).await?;
            check_generation(uuid, expected_generation, generation)?;
            check_inventory_change(tx, uuid, &inventories).await?;
            record(
                tx,
                meta,
                &[Event::InventoriesReplaced { provider: uuid, inventories: inventories.clone(), at: now(tx).await? }],
            )
            .await?;
            Ok(generation + 1)
        })
    }

    /// Adds, updates or deletes the inventory of one class, leaving the
    /// others as they are; returns the new generation.
    pub async fn change_inventory(
        &self,
        meta: &EventMeta,
        uuid: Uuid,
        expected_generation: Option<i64>,
        class: &str,
        change: InventoryChange,
    ) -> Result<i64, Error> {
        if let InventoryChange::Add(inv) | InventoryChange::Update(inv) = &change {
            inv.validate(class)?;
        }
        crate::tx::command!(self, |tx| {
            let generation = lock_provider(tx, uuid).await?;
            check_generation(uuid, expected_generation, generation)?;
            let mut inventories = crate::queries::inventories_of(tx, uuid).await?;
            let exists = inventories.contains_key(class);
            match &change {
                InventoryChange::Add(_) if exists => {
                    return Err(Error::refused(
                        ErrorKind::Conflict,
                        ErrorCode::InventoryExists,
                        Refusal::InventoryExists { provider: uuid, class: class.to_string() },
                    )
                    .into())
                }
                InventoryChange::Update(_) | InventoryChange::Delete if !exists => {
                    return Err(Error::refused(
                        ErrorKind::NotFound,
                        ErrorCode::InventoryNotFound,
                        Refusal::NoInventory { class: class.to_string() },
                    )
                    .into())
                }
                InventoryChange::Add(inv) | InventoryChange::Update(inv) => {
                    inventories.insert(class.to_string(), *inv);
                }
                InventoryChange::Delete => {
                    inventories.remove(class);
                }
            }
            check_inventory_change(tx, uuid, &inventories).await?;
            record(tx, meta, &[Event::InventoriesReplaced { provider: uuid, inventories, at: now(tx).await? }]).await?;
            Ok(generation + 1)
        })
    }

    /// Replaces the provider's traits; returns the new generation.
    pub async fn replace_traits(
        &self,
        meta: &EventMeta,
        uuid: Uuid,
        expected_generation: Option<i64>,
        traits: BTreeSet<String>,
    ) -> Result<i64, Error> {
        crate::tx::command!(self, |tx| { replace_traits_in(tx, meta, uuid, expected_generation, &traits).await })
    }

    /// Replaces the provider's aggregates; returns the generation after.
    pub async fn replace_aggregates(
        &self,
        meta: &EventMeta,
        uuid: Uuid,
        expected_generation: Option<i64>,
        aggregates: BTreeSet<Uuid>,
        bump: bool,
    ) -> Result<i64, Error> {
        crate::tx::command!(self, |tx| {
            let generation = lock_provider(tx, uuid).await?;
            check_generation(uuid, expected_generation, generation)?;
            record(
                tx,
                meta,
                &[Event::ProviderAggregatesReplaced {
                    provider: uuid,
                    aggregates: aggregates.clone(),
                    bump,
                    at: now(tx).await?,
                }],
            )
            .await?;
            Ok(if bump { generation + 1 } else { generation })
        })
    }
}

/// Whether anything is held on provider `$1`: an allocation, or a loan still running.
const HELD_ON: &str = "SELECT 1 FROM allocations WHERE provider_uuid = $1
     UNION ALL SELECT 1 FROM loan_allocations WHERE provider_uuid = $1 AND (upper_inf(during) OR upper(during) > now())
     LIMIT 1";

/// The classes exist, and no class that is dropped still has allocations
/// that hold now or later.
pub(crate) async fn check_inventory_change(
    tx: &Transaction<'_>,
    uuid: Uuid,
    inventories: &BTreeMap<String, Inventory>,
) -> Result<(), StoreError> {
    let classes: Vec<&str> = inventories.keys().map(String::as_str).collect();
    let known = crate::lock::classes_in_use(tx, &classes).await?;
    if let Some(unknown) = classes.iter().find(|c| !known.iter().any(|k| k == *c)) {
        return Err(no_class(unknown).into());
    }
    let in_use: Vec<String> = tx
        .query(
            "SELECT DISTINCT resource_class FROM (
                 SELECT resource_class, during FROM allocations WHERE provider_uuid = $1
                 UNION ALL SELECT resource_class, during FROM loan_allocations WHERE provider_uuid = $1) a
             WHERE NOT (resource_class = ANY($2)) AND (upper(during) IS NULL OR upper(during) > now())",
            &[&uuid, &classes],
        )
        .await?
        .iter()
        .map(|r| r.get("resource_class"))
        .collect();
    if !in_use.is_empty() {
        return Err(refuse::inventory_in_use(uuid, in_use).into());
    }
    Ok(())
}

/// Replaces the provider's traits in `tx`; returns the new generation.
pub(super) async fn replace_traits_in(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    uuid: Uuid,
    expected_generation: Option<i64>,
    traits: &BTreeSet<String>,
) -> Result<i64, StoreError> {
    let generation = lock_provider(tx, uuid).await?;
    check_generation(uuid, expected_generation, generation)?;
    let names: Vec<&str> = traits.iter().map(String::as_str).collect();
    let found = crate::lock::traits_in_use(tx, &names).await?;
    if found.len() != traits.len() {
        let missing: Vec<&str> = names.iter().filter(|n| !found.iter().any(|f| f == *n)).copied().collect();
        let names = missing.into_iter().map(str::to_string).collect();
        return Err(
            Error::refused(ErrorKind::Invalid, ErrorCode::TraitNotFound, Refusal::NoTraitsToSet { names }).into()
        );
    }
    record(tx, meta, &[Event::ProviderTraitsReplaced { provider: uuid, traits: traits.clone(), at: now(tx).await? }])
        .await?;
    Ok(generation + 1)
}
