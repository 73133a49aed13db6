//! `virtual:license`: an example resource type compiled into Berth.
//!
//! A reservation asks for `seats` seats of a software `product`'s license
//! for the lease's window:
//!
//! ```json
//! {"resource_type": "virtual:license", "product": "cad", "seats": 2}
//! ```
//!
//! The seats are not in Berth's inventory, so validate answers
//! [`ResourceRequest::Nothing`]; the license server is told through the
//! plugin's driver (`[plugins.drivers."virtual:license"]`, noop when
//! absent): `checkout` at the start and on update, `notify` before the end,
//! `checkin` at the end, each with the hook's idempotency key, so the
//! license server applies each once.
//!
//! How a build of Berth takes it in: [`ENTRY_POINTS`] names each plugin
//! this crate provides with the function that makes it from the
//! configuration (as Blazar's plugins are named entry points, loaded by
//! stevedore), and [`registry`] builds the registry a daemon serves from
//! the built-in plugins, these, and the configured external ones, keeping
//! those `[plugins] enabled` names.

use std::sync::Arc;

use async_trait::async_trait;
use berth_core::error::ErrorCode;
use berth_core::Error;
use berth_plugins::driver::Driver;
use berth_plugins::params::{param, Param, ParamType};
use berth_plugins::{Hook, HookError, HookOutcome, PluginsConfig, Registry, ResourcePlugin, ResourceRequest};
use serde_json::{json, Value};

pub const RESOURCE_TYPE: &str = "virtual:license";

/// The products there are licenses of.
pub const PRODUCTS: [&str; 3] = ["cad", "simulation", "compiler"];

/// Most seats one reservation may take.
pub const MAX_SEATS: i64 = 100;

/// Berth checks these, and reads each as its type, before validate runs.
const PARAMETERS: &[Param] = &[param("product", ParamType::String), param("seats", ParamType::Integer)];

/// A plugin this crate provides: its name and how it is made.
pub type EntryPoint = (&'static str, fn(&PluginsConfig) -> Result<Arc<dyn ResourcePlugin>, Error>);

/// The plugins of this crate, by the name the configuration enables.
pub const ENTRY_POINTS: &[EntryPoint] = &[(RESOURCE_TYPE, plugin)];

/// The plugin, acting through its configured driver.
pub fn plugin(config: &PluginsConfig) -> Result<Arc<dyn ResourcePlugin>, Error> {
    Ok(Arc::new(LicensePlugin::new(config.driver(RESOURCE_TYPE)?)))
}

/// What a daemon built with this crate serves: the built-in plugins, this
/// crate's, and the external ones, those `enabled` kept. A configuration
/// mistake (a type enabled that nothing provides) is an error here.
pub fn registry(config: &PluginsConfig) -> Result<Registry, Error> {
    let mut plugins = config.builtins()?;
    for (_, make) in ENTRY_POINTS {
        plugins.push(make(config)?);
    }
    config.registry(plugins)
}

pub struct LicensePlugin {
    driver: Arc<dyn Driver>,
}

impl LicensePlugin {
    pub fn new(driver: Arc<dyn Driver>) -> Self {
        LicensePlugin { driver }
    }

    /// Tells the license server, with the hook's key; the answer does not
    /// depend on the attempt, so a retry answers what the first call did.
    async fn tell(&self, action: &str, hook: &Hook) -> Result<HookOutcome, HookError> {
        let r = &hook.reservation;
        let payload = json!({
            "product": r["product"],
            "seats": r["seats"],
            "reservation_id": r["id"],
            "lease_id": hook.lease["id"],
            "project_id": hook.lease["project_id"],
        });
        let answer = self.driver.call(action, &payload, &hook.idempotency_key).await?;
        Ok(HookOutcome { detail: json!({"action": action, "license": payload, "server": answer}), effects: Vec::new() })
    }
}

fn invalid(detail: String) -> Error {
    Error::invalid(ErrorCode::Invalid, format!("{RESOURCE_TYPE}: {detail}"))
}

#[async_trait]
impl ResourcePlugin for LicensePlugin {
    fn resource_type(&self) -> &str {
        RESOURCE_TYPE
    }

    fn parameters(&self) -> Option<&'static [Param]> {
        Some(PARAMETERS)
    }

    fn driver_kind(&self) -> Option<&'static str> {
        Some(self.driver.kind())
    }

    async fn validate(&self, reservation: &Value) -> Result<ResourceRequest, Error> {
        match reservation.get("product").and_then(Value::as_str) {
            Some(p) if PRODUCTS.contains(&p) => {}
            other => return Err(invalid(format!("product must be one of {}, not {other:?}", PRODUCTS.join(", ")))),
        }
        match reservation.get("seats").and_then(Value::as_i64) {
            Some(n) if (1..=MAX_SEATS).contains(&n) => Ok(ResourceRequest::Nothing),
            other => Err(invalid(format!("seats must be a whole number from 1 to {MAX_SEATS}, not {other:?}"))),
        }
    }

    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.tell("checkout", hook).await
    }

    async fn on_update(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.tell("checkout", hook).await
    }

    async fn before_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.tell("notify", hook).await
    }

    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.tell("checkin", hook).await
    }
}
