//! Plugins by resource type. Plugins register under their name; the
//! configuration enables them by name (as Blazar loads its entry points).

use std::collections::BTreeMap;
use std::sync::Arc;

use berth_core::error::ErrorCode;
use berth_core::lease::Demand;
use berth_core::Error;

use crate::plugin::ResourcePlugin;

#[derive(Clone, Default)]
pub struct Registry {
    plugins: BTreeMap<String, Arc<dyn ResourcePlugin>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a plugin under its resource type (one line per plugin).
    pub fn register(&mut self, plugin: Arc<dyn ResourcePlugin>) -> &mut Self {
        self.plugins.insert(plugin.resource_type().to_string(), plugin);
        self
    }

    /// Keeps only the named types (the configuration's `enabled` list).
    pub fn enable_only(&mut self, names: &[String]) {
        self.plugins.retain(|k, _| names.iter().any(|n| n == k));
    }

    /// The plugin for `resource_type`; an unknown or disabled type is bad input.
    pub fn get(&self, resource_type: &str) -> Result<Arc<dyn ResourcePlugin>, Error> {
        self.plugins.get(resource_type).cloned().ok_or_else(|| {
            Error::invalid(
                ErrorCode::Invalid,
                format!(
                    "resource_type {resource_type:?} is unknown or not enabled (enabled: {})",
                    self.plugins.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }

    /// The enabled plugins, by resource type.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<dyn ResourcePlugin>> {
        self.plugins.values()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.plugins.keys().map(String::as_str)
    }

    /// What a stored reservation needs, asked of its plugin again (for
    /// healing); `None` when its type is no longer enabled or its plugin no
    /// longer accepts it.
    pub async fn demand_of(&self, resource_type: &str, params: &serde_json::Value) -> Option<Demand> {
        let plugin = self.get(resource_type).ok()?;
        match plugin.validate(params).await.and_then(|r| crate::host::demand(&r)) {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::warn!(resource_type, error = %e.detail, "a reservation to heal no longer validates");
                None
            }
        }
    }
}
