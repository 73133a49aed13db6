//! The enabled resource plugins as callers see them, and the protocol
//! external plugins speak.

use serde_json::Value;

use crate::{App, Caller, Error, Owner, Rule};

/// One enabled resource type.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    /// The resource type, as reservations name it.
    pub resource_type: String,
    /// `noop`, `webhook` or `exec`; `None` for a plugin with no driver.
    pub driver: Option<&'static str>,
    /// Served over the protocol rather than compiled in.
    pub external: bool,
    /// The parameters a reservation of this type takes, `(name, type)`;
    /// `None` when the plugin checks its own.
    pub parameters: Option<Vec<(&'static str, &'static str)>>,
}

/// The plugin use cases, over one [`App`].
pub struct Plugins<'a> {
    app: &'a App,
}

impl Plugins<'_> {
    /// The enabled resource types.
    pub fn list(&self, caller: &Caller<'_>) -> Result<Vec<PluginInfo>, Error> {
        caller.authorize(Rule::PluginsList, Owner::Caller)?;
        Ok(self
            .app
            .plugins
            .plugins()
            .map(|p| PluginInfo {
                resource_type: p.resource_type().to_string(),
                driver: p.driver_kind(),
                external: p.is_external(),
                parameters: p.parameters().map(|declared| declared.iter().map(|d| (d.name, d.kind.name())).collect()),
            })
            .collect())
    }

    /// The plugin protocol as JSON Schemas.
    pub fn schema(&self, caller: &Caller<'_>) -> Result<&'static Value, Error> {
        caller.authorize(Rule::PluginsSchema, Owner::Caller)?;
        Ok(berth_plugins::protocol::schema())
    }
}

impl App {
    /// The plugin use cases.
    pub fn plugins(&self) -> Plugins<'_> {
        Plugins { app: self }
    }
}
