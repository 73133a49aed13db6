//! Resource classes and traits: the vocabulary providers and requests use.

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::names::is_custom_name;
use berth_core::{Error, Event, EventMeta};

use super::record;
use crate::refuse::{duplicate, invalid};
use crate::Store;

/// `refusal` names the vocabulary: a class or a trait.
fn check_custom(name: &str, refusal: fn(String) -> Refusal) -> Result<(), Error> {
    if !is_custom_name(name) {
        return Err(invalid(refusal(name.to_string())));
    }
    Ok(())
}

/// No class by that name where the path names one (404).
fn no_class(class: &str) -> Error {
    Error::refused(
        ErrorKind::NotFound,
        ErrorCode::ResourceClassNotFound,
        Refusal::NoResourceClass { class: class.to_string() },
    )
}

impl Store {
    /// Creates a custom resource class; `Ok(false)` when it already exists
    /// and `must_be_new` is false (Placement's idempotent PUT).
    pub async fn create_resource_class(&self, meta: &EventMeta, name: &str, must_be_new: bool) -> Result<bool, Error> {
        check_custom(name, |name| Refusal::NotCustomClass { name })?;
        crate::tx::command!(self, |tx| {
            let exists = tx.query_opt("SELECT 1 FROM resource_classes WHERE name = $1", &[&name]).await?.is_some();
            if exists {
                if must_be_new {
                    return Err(duplicate(Refusal::ResourceClassExists { class: name.to_string() }).into());
                }
                return Ok(false);
            }
            record(tx, meta, &[Event::ResourceClassCreated { name: name.to_string() }]).await?;
            Ok(true)
        })
    }

    /// Renames a custom resource class; its inventories and allocations follow.
    pub async fn rename_resource_class(&self, meta: &EventMeta, from: &str, to: &str) -> Result<(), Error> {
        check_custom(to, |name| Refusal::NotCustomClass { name })?;
        crate::tx::command!(self, |tx| {
            let Some(standard) = crate::lock::resource_class(tx, from).await? else {
                return Err(no_class(from).into());
            };
            if standard {
                return Err(invalid(Refusal::StandardClassUpdate { class: from.to_string() }).into());
            }
            if from == to {
                return Ok(());
            }
            if tx.query_opt("SELECT 1 FROM resource_classes WHERE name = $1", &[&to]).await?.is_some() {
                return Err(duplicate(Refusal::RenameToExisting { class: to.to_string() }).into());
            }
            record(tx, meta, &[Event::ResourceClassRenamed { from: from.to_string(), to: to.to_string() }]).await?;
            Ok(())
        })
    }

    pub async fn delete_resource_class(&self, meta: &EventMeta, name: &str) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let Some(standard) = crate::lock::resource_class(tx, name).await? else {
                return Err(no_class(name).into());
            };
            if standard {
                return Err(invalid(Refusal::StandardClassDelete { class: name.to_string() }).into());
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
                let refusal = Refusal::ResourceClassInUse { class: name.to_string() };
                return Err(Error::refused(ErrorKind::InUse, ErrorCode::ResourceClassInUse, refusal).into());
            }
            record(tx, meta, &[Event::ResourceClassDeleted { name: name.to_string() }]).await?;
            Ok(())
        })
    }

    /// Creates a custom trait; `Ok(false)` when it already exists.
    pub async fn create_trait(&self, meta: &EventMeta, name: &str) -> Result<bool, Error> {
        check_custom(name, |name| Refusal::NotCustomTrait { name })?;
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
                let refusal = Refusal::NoTraits { names: vec![name.to_string()] };
                return Err(Error::refused(ErrorKind::NotFound, ErrorCode::TraitNotFound, refusal).into());
            };
            if standard {
                return Err(invalid(Refusal::StandardTraitDelete { name: name.to_string() }).into());
            }
            if tx.query_opt("SELECT 1 FROM provider_traits WHERE trait = $1 LIMIT 1", &[&name]).await?.is_some() {
                let refusal = Refusal::TraitInUse { name: name.to_string() };
                return Err(Error::refused(ErrorKind::InUse, ErrorCode::TraitInUse, refusal).into());
            }
            record(tx, meta, &[Event::TraitDeleted { name: name.to_string() }]).await?;
            Ok(())
        })
    }
}
