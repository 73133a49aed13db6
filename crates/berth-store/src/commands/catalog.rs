//! Resource classes and traits: the vocabulary providers and requests use.

use berth_core::error::ErrorCode;
use berth_core::names::is_custom_name;
use berth_core::{Error, Event, EventMeta};

use super::record;
use crate::Store;

fn check_custom(what: &str, name: &str) -> Result<(), Error> {
    if !is_custom_name(name) {
        return Err(Error::invalid(
            ErrorCode::Invalid,
            format!("{what} {name:?} must be CUSTOM_ and upper-case letters, digits or _"),
        ));
    }
    Ok(())
}

impl Store {
    /// Creates a custom resource class; `Ok(false)` when it already exists
    /// and `must_be_new` is false (Placement's idempotent PUT).
    pub async fn create_resource_class(&self, meta: &EventMeta, name: &str, must_be_new: bool) -> Result<bool, Error> {
        check_custom("resource class", name)?;
        crate::tx::command!(self, |tx| {
            let exists = tx.query_opt("SELECT 1 FROM resource_classes WHERE name = $1", &[&name]).await?.is_some();
            if exists {
                if must_be_new {
                    return Err(Error::conflict(
                        ErrorCode::DuplicateName,
                        format!("Conflicting resource class already exists: {name}"),
                    )
                    .into());
                }
                return Ok(false);
            }
            record(tx, meta, &[Event::ResourceClassCreated { name: name.to_string() }]).await?;
            Ok(true)
        })
    }

    /// Renames a custom resource class; its inventories and allocations follow.
    pub async fn rename_resource_class(&self, meta: &EventMeta, from: &str, to: &str) -> Result<(), Error> {
        check_custom("resource class", to)?;
        crate::tx::command!(self, |tx| {
            let Some(standard) = crate::lock::resource_class(tx, from).await? else {
                return Err(Error::not_found(
                    ErrorCode::ResourceClassNotFound,
                    format!("No such resource class {from}."),
                )
                .into());
            };
            if standard {
                return Err(Error::invalid(
                    ErrorCode::Invalid,
                    format!("Cannot update standard resource class {from}"),
                )
                .into());
            }
            if from == to {
                return Ok(());
            }
            if tx.query_opt("SELECT 1 FROM resource_classes WHERE name = $1", &[&to]).await?.is_some() {
                return Err(
                    Error::conflict(ErrorCode::DuplicateName, format!("Resource class already exists: {to}")).into()
                );
            }
            record(tx, meta, &[Event::ResourceClassRenamed { from: from.to_string(), to: to.to_string() }]).await?;
            Ok(())
        })
    }

    pub async fn delete_resource_class(&self, meta: &EventMeta, name: &str) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let Some(standard) = crate::lock::resource_class(tx, name).await? else {
                return Err(Error::not_found(
                    ErrorCode::ResourceClassNotFound,
                    format!("No such resource class {name}."),
                )
                .into());
            };
            if standard {
                return Err(Error::invalid(
                    ErrorCode::Invalid,
                    format!("Cannot delete standard resource class {name}."),
                )
                .into());
            }
            let used = tx
                .query_opt(
                    "SELECT 1 FROM inventories WHERE resource_class = $1
                     UNION ALL SELECT 1 FROM allocations WHERE resource_class = $1 LIMIT 1",
                    &[&name],
                )
                .await?
                .is_some();
            if used {
                return Err(Error::in_use(
                    ErrorCode::ResourceClassInUse,
                    format!("Cannot delete resource class {name}. Class is in use in inventory."),
                )
                .into());
            }
            record(tx, meta, &[Event::ResourceClassDeleted { name: name.to_string() }]).await?;
            Ok(())
        })
    }

    /// Creates a custom trait; `Ok(false)` when it already exists.
    pub async fn create_trait(&self, meta: &EventMeta, name: &str) -> Result<bool, Error> {
        check_custom("trait", name)?;
        crate::tx::command!(self, |tx| {
            if tx.query_opt("SELECT 1 FROM traits WHERE name = $1", &[&name]).await?.is_some() {
                return Ok(false);
            }
            record(tx, meta, &[Event::TraitCreated { name: name.to_string() }]).await?;
            Ok(true)
        })
    }

    pub async fn delete_trait(&self, meta: &EventMeta, name: &str) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let Some(standard) = crate::lock::trait_named(tx, name).await? else {
                return Err(Error::not_found(ErrorCode::TraitNotFound, format!("No such trait(s): {name}.")).into());
            };
            if standard {
                return Err(Error::invalid(ErrorCode::Invalid, format!("Cannot delete standard trait {name}.")).into());
            }
            if tx.query_opt("SELECT 1 FROM provider_traits WHERE trait = $1 LIMIT 1", &[&name]).await?.is_some() {
                return Err(Error::in_use(
                    ErrorCode::TraitInUse,
                    format!("The trait {name} is in use by a resource provider."),
                )
                .into());
            }
            record(tx, meta, &[Event::TraitDeleted { name: name.to_string() }]).await?;
            Ok(())
        })
    }
}
