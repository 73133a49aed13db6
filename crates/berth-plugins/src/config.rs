//! The `[plugins]` section of the daemon's configuration: which resource
//! types leases may use, the driver each built-in plugin acts through, and
//! the external resource types.
//!
//! ```toml
//! [plugins]
//! enabled = ["physical:host", "virtual:instance", "virtual:floatingip"]
//!
//! [plugins.drivers."virtual:instance"]
//! driver = "webhook"
//! url = "http://127.0.0.1:9000/berth"
//! secret = "change me"
//! timeout_ms = 5000
//!
//! [plugins.external."virtual:floatingip"]
//! driver = "exec"
//! program = "examples/plugins/floatingip/floatingip.py"
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use berth_core::error::ErrorCode;
use berth_core::Error;
use serde::{Deserialize, Serialize};

use crate::driver::{Driver, DriverConfig};
use crate::external::ExternalPlugin;
use crate::plugin::ResourcePlugin;
use crate::registry::Registry;

/// The resource types compiled into Berth.
pub const BUILTIN_TYPES: [&str; 3] = ["physical:host", "virtual:instance", "flavor:instance"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginsConfig {
    /// The resource types leases may name; any other is refused with 400.
    pub enabled: Vec<String>,
    /// The driver of each built-in plugin, by resource type; `noop` when absent.
    pub drivers: BTreeMap<String, DriverConfig>,
    /// Resource types served over the driver protocol, by name.
    pub external: BTreeMap<String, DriverConfig>,
    /// `[plugins.host]`: what `physical:host` does before and at a lease's end.
    pub host: crate::host::HostOptions,
    /// `[plugins.instance]`: what `virtual:instance` does at a lease's end.
    pub instance: crate::instance::InstanceOptions,
    /// `[plugins.flavor]`: the flavors `flavor:instance` reserves, and
    /// what it does at a lease's end.
    pub flavor: crate::flavor::FlavorOptions,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            enabled: BUILTIN_TYPES.iter().map(|s| s.to_string()).collect(),
            drivers: BTreeMap::new(),
            external: BTreeMap::new(),
            host: Default::default(),
            instance: Default::default(),
            flavor: Default::default(),
        }
    }
}

fn invalid(detail: String) -> Error {
    Error::invalid(ErrorCode::Invalid, format!("[plugins] {detail}"))
}

impl PluginsConfig {
    /// The driver a built-in plugin of `resource_type` acts through.
    pub fn driver(&self, resource_type: &str) -> Result<Arc<dyn Driver>, Error> {
        self.drivers.get(resource_type).cloned().unwrap_or_default().build()
    }

    /// The built-in plugins, each with its configured driver and options.
    pub fn builtins(&self) -> Result<Vec<Arc<dyn ResourcePlugin>>, Error> {
        let driver = |t: &str| self.driver(t).map_err(|e| invalid(format!("drivers.{t:?}: {}", e.detail)));
        Ok(vec![
            Arc::new(crate::host::HostPlugin::new(driver(crate::host::RESOURCE_TYPE)?, self.host.clone())),
            Arc::new(crate::instance::InstancePlugin::new(
                driver(crate::instance::RESOURCE_TYPE)?,
                self.instance.clone(),
            )),
            Arc::new(
                crate::flavor::FlavorPlugin::new(driver(crate::flavor::RESOURCE_TYPE)?, self.flavor.clone())
                    .map_err(|e| invalid(format!("flavor.{}", e.detail)))?,
            ),
        ])
    }

    /// Checks the section without the built-in plugins at hand: every
    /// driver and external type builds, and every enabled type is built-in
    /// or declared. What [`registry`](Self::registry) refuses, except a
    /// built-in type missing from the given plugins.
    pub fn check(&self) -> Result<(), Error> {
        self.flavor.check().map_err(|e| invalid(format!("flavor.{}", e.detail)))?;
        let builtins: Vec<Arc<dyn ResourcePlugin>> = BUILTIN_TYPES
            .iter()
            .map(|t| Arc::new(ExternalPlugin::new(*t, Arc::new(crate::driver::NoopDriver::new()))) as _)
            .collect();
        self.registry(builtins).map(|_| ())
    }

    /// Builds the registry: the given built-in plugins and the configured
    /// external ones, then keeps only the enabled types. Every configuration
    /// mistake is reported here, at start, rather than at the first lease:
    /// a driver that does not build, an external type shadowing a built-in
    /// one, a driver for a type that does not exist, an enabled type that
    /// nothing provides.
    pub fn registry(&self, builtins: Vec<Arc<dyn ResourcePlugin>>) -> Result<Registry, Error> {
        let mut registry = Registry::new();
        let mut known: Vec<String> = Vec::new();
        for p in builtins {
            known.push(p.resource_type().to_string());
            registry.register(p);
        }
        // A build of Berth may compile in plugins of its own: each takes its
        // driver from [plugins.drivers] as the built-in ones do.
        let compiled_in = known.clone();
        for (name, driver) in &self.external {
            if known.iter().any(|k| k == name) || BUILTIN_TYPES.contains(&name.as_str()) {
                return Err(invalid(format!("external type {name:?} has the name of a built-in type")));
            }
            let plugin = ExternalPlugin::from_config(name, driver)
                .map_err(|e| invalid(format!("external type {name:?}: {}", e.detail)))?;
            known.push(name.clone());
            registry.register(Arc::new(plugin));
        }
        for (name, driver) in &self.drivers {
            if !compiled_in.contains(name) {
                return Err(invalid(format!(
                    "drivers.{name:?}: not a built-in type (external types carry their driver in [plugins.external])"
                )));
            }
            driver.build().map_err(|e| invalid(format!("drivers.{name:?}: {}", e.detail)))?;
        }
        for name in &self.enabled {
            if !known.contains(name) {
                return Err(invalid(format!(
                    "enabled type {name:?} is provided by no plugin (known: {})",
                    known.join(", ")
                )));
            }
        }
        registry.enable_only(&self.enabled);
        Ok(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Hook, HookError, HookOutcome, ResourceRequest};

    struct Builtin(&'static str);

    #[async_trait::async_trait]
    impl ResourcePlugin for Builtin {
        fn resource_type(&self) -> &str {
            self.0
        }
        async fn validate(&self, _: &serde_json::Value) -> Result<ResourceRequest, Error> {
            Ok(ResourceRequest::Nothing)
        }
        async fn on_start(&self, _: &Hook) -> Result<HookOutcome, HookError> {
            Ok(HookOutcome::default())
        }
        async fn before_end(&self, _: &Hook) -> Result<HookOutcome, HookError> {
            Ok(HookOutcome::default())
        }
        async fn on_end(&self, _: &Hook) -> Result<HookOutcome, HookError> {
            Ok(HookOutcome::default())
        }
    }

    fn builtins() -> Vec<Arc<dyn ResourcePlugin>> {
        BUILTIN_TYPES.iter().map(|t| Arc::new(Builtin(t)) as Arc<dyn ResourcePlugin>).collect()
    }

    fn parse(v: serde_json::Value) -> PluginsConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_default_enables_the_built_in_types_with_noop() {
        let c = PluginsConfig::default();
        let r = c.registry(builtins()).unwrap();
        assert_eq!(r.names().collect::<Vec<_>>(), ["flavor:instance", "physical:host", "virtual:instance"]);
        assert_eq!(c.driver("physical:host").unwrap().kind(), "noop");
    }

    #[test]
    fn external_types_register_and_only_enabled_ones_answer() {
        let c = parse(serde_json::json!({
            "enabled": ["physical:host", "virtual:floatingip"],
            "drivers": {"physical:host": {"driver": "webhook", "url": "http://127.0.0.1:1/h"}},
            "external": {
                "virtual:floatingip": {"driver": "exec", "program": "/bin/true"},
                "virtual:spare": {"driver": "noop"}
            }
        }));
        let r = c.registry(builtins()).unwrap();
        assert_eq!(r.names().collect::<Vec<_>>(), ["physical:host", "virtual:floatingip"]);
        assert!(r.get("virtual:instance").is_err(), "disabled");
        assert!(r.get("virtual:spare").is_err(), "declared but not enabled");
        assert_eq!(c.driver("physical:host").unwrap().kind(), "webhook");
        assert_eq!(c.driver("virtual:instance").unwrap().kind(), "noop");
    }

    #[test]
    fn check_knows_the_built_in_names() {
        PluginsConfig::default().check().unwrap();
        let bad =
            parse(serde_json::json!({"flavor": {"flavors": {"f": {"vcpus": 1, "extra_specs": {"trait:X": "maybe"}}}}}));
        assert!(bad.check().unwrap_err().detail.contains("flavor.flavors.\"f\""));
        let c = parse(serde_json::json!({"enabled": ["virtual:instance", "virtual:nothing"]}));
        assert!(c.check().is_err());
    }

    #[test]
    fn mistakes_are_reported_at_start() {
        let cases = [
            serde_json::json!({"enabled": ["virtual:nothing"]}),
            serde_json::json!({"external": {"physical:host": {"driver": "noop"}}}),
            serde_json::json!({"drivers": {"virtual:floatingip": {"driver": "noop"}}}),
            serde_json::json!({"drivers": {"physical:host": {"driver": "webhook", "url": "ftp://x"}}}),
            serde_json::json!({"external": {"x:y": {"driver": "exec", "program": "/bin/true", "timeout_ms": 0}}}),
        ];
        for case in cases {
            let err = parse(case.clone()).registry(builtins()).map(|_| ()).unwrap_err();
            assert_eq!(err.kind, berth_core::error::ErrorKind::Invalid, "{case}");
        }
        assert!(serde_json::from_value::<PluginsConfig>(serde_json::json!({"enable": []})).is_err());
    }
}
