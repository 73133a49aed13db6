//! External plugins: a resource type declared in the configuration and served
//! entirely by a program (`exec`) or a web service (`webhook`) over the driver
//! protocol, so that a new resource type needs no Rust.
//!
//! Calls (the `action` of the driver envelope; payloads in `docs/plugins.md`):
//! `validate` answers a [`ResourceRequest`] or rejects the reservation with a
//! permanent failure; `on_start`, `before_end`, `on_end`, `on_update` and `on_heal` get
//! the [`Hook`] and answer anything JSON, recorded as the hook's outcome.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use berth_core::error::ErrorCode;
use serde_json::json;

use crate::driver::{Driver, DriverConfig};
use crate::plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};

/// Attempts at a `validate` call whose failure may be passing (a 503, a
/// restart): it runs while a client waits, so it gives up quickly.
const VALIDATE_ATTEMPTS: usize = 2;

pub struct ExternalPlugin {
    resource_type: String,
    driver: Arc<dyn Driver>,
}

impl ExternalPlugin {
    pub fn new(resource_type: impl Into<String>, driver: Arc<dyn Driver>) -> Self {
        ExternalPlugin { resource_type: resource_type.into(), driver }
    }

    pub fn from_config(resource_type: &str, config: &DriverConfig) -> Result<Self, berth_core::Error> {
        if resource_type.trim().is_empty() {
            return Err(berth_core::Error::invalid(ErrorCode::Invalid, "an external resource type needs a name"));
        }
        Ok(Self::new(resource_type, config.build()?))
    }

    async fn hook(&self, action: &str, hook: &Hook) -> Result<HookOutcome, HookError> {
        let payload = hook_payload(&self.resource_type, hook)?;
        let detail = self.driver.call(action, &payload, &hook.idempotency_key).await?;
        Ok(HookOutcome { detail, effects: Vec::new() })
    }
}

/// The payload of `validate` (`validate_payload` in the protocol's schema).
pub fn validate_payload(resource_type: &str, reservation: &serde_json::Value) -> serde_json::Value {
    json!({"resource_type": resource_type, "reservation": reservation})
}

/// The payload of a hook action (`hook_payload` in the protocol's schema).
pub fn hook_payload(resource_type: &str, hook: &Hook) -> Result<serde_json::Value, HookError> {
    let mut payload = serde_json::to_value(hook).map_err(|e| HookError::permanent(format!("encoding: {e}")))?;
    if let Some(o) = payload.as_object_mut() {
        o.insert("resource_type".into(), json!(resource_type));
    }
    Ok(payload)
}

/// An answer as an error message quotes it: long ones cut.
fn shortened(text: &str) -> String {
    const MAX: usize = 500;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut cut = MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[async_trait]
impl ResourcePlugin for ExternalPlugin {
    fn resource_type(&self) -> &str {
        &self.resource_type
    }

    fn driver_kind(&self) -> Option<&'static str> {
        Some(self.driver.kind())
    }

    fn is_external(&self) -> bool {
        true
    }

    async fn validate(&self, reservation: &serde_json::Value) -> Result<ResourceRequest, berth_core::Error> {
        let payload = validate_payload(&self.resource_type, reservation);
        // Validation changes nothing outside, so its key only has to be
        // the same across the attempts of this one call.
        let key = format!("validate:{}", uuid::Uuid::new_v4());
        let answer = (|| self.driver.call("validate", &payload, &key))
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(50))
                    .with_max_times(VALIDATE_ATTEMPTS - 1)
                    .with_jitter(),
            )
            .when(|e: &HookError| !e.permanent)
            .await;
        match answer {
            // The plugin's fault, not the client's: 500, saying what is wrong.
            Ok(v) => crate::protocol::read_validate_answer(&v).map_err(|e| {
                berth_core::Error::internal(format!(
                    "the {} plugin answered validate with something that is not a resource request: {e} (it answered {})",
                    self.resource_type,
                    shortened(&v.to_string())
                ))
            }),
            // The plugin looked at the reservation and refused it.
            Err(e) if e.permanent => Err(berth_core::Error::invalid(
                ErrorCode::Invalid,
                format!("{} rejected the reservation: {}", self.resource_type, e.message),
            )),
            Err(e) => Err(berth_core::Error::internal(format!(
                "the {} plugin could not validate the reservation: {}",
                self.resource_type, e.message
            ))),
        }
    }

    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.hook("on_start", hook).await
    }

    async fn before_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.hook("before_end", hook).await
    }

    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.hook("on_end", hook).await
    }

    async fn on_update(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.hook("on_update", hook).await
    }

    async fn on_heal(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.hook("on_heal", hook).await
    }
}
