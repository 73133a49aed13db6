//! Providers and what hangs off them: inventories, traits, aggregates.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::error::codes;
use berth_core::{Error, Event, EventMeta, Inventory};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::{now, record};
use crate::{Store, StoreError};

pub struct NewProvider {
    pub uuid: Option<Uuid>,
    pub name: String,
    pub parent: Option<Uuid>,
}

/// Locks one provider row and returns its generation.
pub(crate) async fn lock_provider(tx: &Transaction<'_>, uuid: Uuid) -> Result<i64, StoreError> {
    let row = tx.query_opt("SELECT generation FROM providers WHERE uuid = $1 FOR UPDATE", &[&uuid]).await?;
    match row {
        Some(r) => Ok(r.get(0)),
        None => Err(Error::not_found(codes::NOT_FOUND, format!("no resource provider {uuid}")).into()),
    }
}

fn check_generation(uuid: Uuid, expected: Option<i64>, actual: i64) -> Result<(), StoreError> {
    match expected {
        Some(g) if g != actual => Err(Error::generation(format!(
            "resource provider {uuid} generation is {actual}, not {g}: someone else updated it; fetch and retry"
        ))
        .into()),
        _ => Ok(()),
    }
}

fn validate_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.chars().count() > 200 {
        return Err(Error::invalid(codes::INVALID, "provider name must be 1 to 200 characters"));
    }
    Ok(())
}

impl Store {
    pub async fn create_provider(&self, meta: &EventMeta, new: NewProvider) -> Result<Uuid, Error> {
        validate_name(&new.name)?;
        let uuid = new.uuid.unwrap_or_else(Uuid::new_v4);
        crate::tx::command!(self, |tx| {
            if let Some(parent) = new.parent {
                // Share-lock the parent so it cannot be deleted under us.
                if tx.query_opt("SELECT 1 FROM providers WHERE uuid = $1 FOR SHARE", &[&parent]).await?.is_none() {
                    return Err(
                        Error::invalid(codes::INVALID, format!("parent provider {parent} does not exist")).into()
                    );
                }
            }
            if tx.query_opt("SELECT 1 FROM providers WHERE uuid = $1", &[&uuid]).await?.is_some() {
                return Err(Error::conflict(
                    codes::DUPLICATE_NAME,
                    format!("resource provider with uuid {uuid} already exists"),
                )
                .into());
            }
            if tx.query_opt("SELECT 1 FROM providers WHERE name = $1", &[&new.name]).await?.is_some() {
                return Err(Error::conflict(
                    codes::DUPLICATE_NAME,
                    format!("resource provider with name {} already exists", new.name),
                )
                .into());
            }
            record(tx, meta, &[Event::ProviderCreated { uuid, name: new.name.clone(), parent: new.parent, at: now() }])
                .await?;
            Ok(uuid)
        })
    }

    /// Renames and/or re-parents. `parent` is the whole new value.
    pub async fn update_provider(
        &self,
        meta: &EventMeta,
        uuid: Uuid,
        name: &str,
        parent: Option<Uuid>,
    ) -> Result<(), Error> {
        validate_name(name)?;
        crate::tx::command!(self, |tx| {
            lock_provider(tx, uuid).await?;
            if let Some(p) = parent {
                if p == uuid {
                    return Err(Error::invalid(codes::INVALID, "a provider cannot be its own parent").into());
                }
                if tx.query_opt("SELECT 1 FROM providers WHERE uuid = $1 FOR SHARE", &[&p]).await?.is_none() {
                    return Err(Error::invalid(codes::INVALID, format!("parent provider {p} does not exist")).into());
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
                    return Err(Error::invalid(
                        codes::INVALID,
                        format!("{p} is a descendant of {uuid}: that would make a loop"),
                    )
                    .into());
                }
            }
            let taken = tx.query_opt("SELECT 1 FROM providers WHERE name = $1 AND uuid <> $2", &[&name, &uuid]).await?;
            if taken.is_some() {
                return Err(Error::conflict(
                    codes::DUPLICATE_NAME,
                    format!("resource provider with name {name} already exists"),
                )
                .into());
            }
            record(tx, meta, &[Event::ProviderUpdated { uuid, name: name.to_string(), parent, at: now() }]).await?;
            Ok(())
        })
    }

    pub async fn delete_provider(&self, meta: &EventMeta, uuid: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            lock_provider(tx, uuid).await?;
            if tx.query_opt("SELECT 1 FROM providers WHERE parent_uuid = $1 LIMIT 1", &[&uuid]).await?.is_some() {
                return Err(Error::conflict(
                    codes::CANNOT_DELETE_PARENT,
                    format!("resource provider {uuid} has children"),
                )
                .into());
            }
            if tx.query_opt("SELECT 1 FROM allocations WHERE provider_uuid = $1 LIMIT 1", &[&uuid]).await?.is_some() {
                return Err(
                    Error::in_use(codes::PROVIDER_IN_USE, format!("resource provider {uuid} has allocations")).into()
                );
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
                &[Event::InventoriesReplaced { provider: uuid, inventories: inventories.clone(), at: now() }],
            )
            .await?;
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
        crate::tx::command!(self, |tx| {
            let generation = lock_provider(tx, uuid).await?;
            check_generation(uuid, expected_generation, generation)?;
            let names: Vec<&str> = traits.iter().map(String::as_str).collect();
            // Share-lock the traits so a concurrent delete waits for us.
            let found: Vec<String> = tx
                .query("SELECT name FROM traits WHERE name = ANY($1) ORDER BY name FOR SHARE", &[&names])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if found.len() != traits.len() {
                let missing: Vec<&str> = names.iter().filter(|n| !found.iter().any(|f| f == *n)).copied().collect();
                return Err(Error::invalid(codes::INVALID, format!("no such trait(s): {}", missing.join(", "))).into());
            }
            record(tx, meta, &[Event::ProviderTraitsReplaced { provider: uuid, traits: traits.clone(), at: now() }])
                .await?;
            Ok(generation + 1)
        })
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
                    at: now(),
                }],
            )
            .await?;
            Ok(if bump { generation + 1 } else { generation })
        })
    }
}

/// The classes exist, and no class that is dropped still has allocations
/// that hold now or later.
pub(crate) async fn check_inventory_change(
    tx: &Transaction<'_>,
    uuid: Uuid,
    inventories: &BTreeMap<String, Inventory>,
) -> Result<(), StoreError> {
    let classes: Vec<&str> = inventories.keys().map(String::as_str).collect();
    let known: Vec<String> = tx
        .query("SELECT name FROM resource_classes WHERE name = ANY($1) FOR SHARE", &[&classes])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if let Some(unknown) = classes.iter().find(|c| !known.iter().any(|k| k == *c)) {
        return Err(Error::invalid(codes::INVALID, format!("unknown resource class {unknown}")).into());
    }
    let in_use: Vec<String> = tx
        .query(
            "SELECT DISTINCT resource_class FROM allocations
             WHERE provider_uuid = $1 AND NOT (resource_class = ANY($2))
               AND (upper(during) IS NULL OR upper(during) > now())",
            &[&uuid, &classes],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !in_use.is_empty() {
        return Err(Error::in_use(
            codes::INVENTORY_IN_USE,
            format!("inventory of {} on resource provider {uuid} has allocations", in_use.join(", ")),
        )
        .into());
    }
    Ok(())
}
