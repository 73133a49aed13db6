//! Resource classes: the standard ones and an operator's custom ones.

use super::{May, Rule};
use crate::{App, Error};

/// Placement's resource class use cases, over one [`App`].
pub struct Classes<'a> {
    pub(crate) app: &'a App,
}

impl Classes<'_> {
    /// Every class's name.
    pub async fn list(&self, may: &May) -> Result<Vec<String>, Error> {
        may.grants(Rule::ClassesList)?;
        Ok(self.app.store.resource_classes().await?)
    }

    /// Whether the class `name` exists.
    pub async fn exists(&self, may: &May, name: &str) -> Result<bool, Error> {
        may.grants(Rule::ClassesShow)?;
        Ok(self.app.store.resource_class_exists(name).await?)
    }

    /// Creates the custom class `name`; a conflict when it exists.
    pub async fn create(&self, may: &May, name: &str) -> Result<(), Error> {
        let meta = may.grants(Rule::ClassesCreate)?;
        self.app.store.create_resource_class(meta, name, true).await?;
        Ok(())
    }

    /// Makes sure the custom class `name` exists; whether it was created.
    pub async fn ensure(&self, may: &May, name: &str) -> Result<bool, Error> {
        let meta = may.grants(Rule::ClassesUpdate)?;
        Ok(self.app.store.create_resource_class(meta, name, false).await?)
    }

    /// Renames the custom class `from` to `to`.
    pub async fn rename(&self, may: &May, from: &str, to: &str) -> Result<(), Error> {
        let meta = may.grants(Rule::ClassesUpdate)?;
        Ok(self.app.store.rename_resource_class(meta, from, to).await?)
    }

    /// Deletes the custom class `name` (no inventory of it).
    pub async fn delete(&self, may: &May, name: &str) -> Result<(), Error> {
        let meta = may.grants(Rule::ClassesDelete)?;
        Ok(self.app.store.delete_resource_class(meta, name).await?)
    }
}
