//! A compiled-in plugin answering the protocol: [`PluginDriver`] turns
//! each action into a call of the plugin's method, and [`serve_exec`]
//! answers one call on stdin as an exec program does. So a plugin written
//! in Rust can be driven by `berth plugin check` exactly as an external one
//! is, and served over exec without a Berth of its own build.

use std::io::{Read, Write};
use std::sync::Arc;

use async_trait::async_trait;
use berth_core::error::ErrorKind;
use serde_json::{json, Value};

use crate::driver::{Driver, Envelope};
use crate::plugin::{Hook, HookError, ResourcePlugin};

/// Exit status of an exec program that refuses (no retry); any other
/// failure exits 1.
const EXIT_PERMANENT: i32 = 2;

pub struct PluginDriver {
    plugin: Arc<dyn ResourcePlugin>,
}

impl PluginDriver {
    pub fn new(plugin: Arc<dyn ResourcePlugin>) -> Self {
        PluginDriver { plugin }
    }

    /// validate as the lease API runs it: declared parameters checked and
    /// read as their types first, then the plugin's own check.
    async fn validate(&self, payload: &Value) -> Result<Value, HookError> {
        let refusal = |e: berth_core::Error| match e.kind {
            ErrorKind::Invalid => HookError::permanent(e.detail),
            _ => HookError::retryable(e.detail),
        };
        let given = payload.get("reservation").cloned().unwrap_or(Value::Null);
        let reservation = match self.plugin.parameters() {
            Some(declared) => {
                crate::params::normalize(self.plugin.resource_type(), declared, &given).map_err(refusal)?
            }
            None => given,
        };
        let request = self.plugin.validate(&reservation).await.map_err(refusal)?;
        serde_json::to_value(request).map_err(|e| HookError::permanent(format!("encoding: {e}")))
    }
}

#[async_trait]
impl Driver for PluginDriver {
    fn kind(&self) -> &'static str {
        "compiled-in"
    }

    async fn call(&self, action: &str, payload: &Value, _idempotency_key: &str) -> Result<Value, HookError> {
        if action == "validate" {
            return self.validate(payload).await;
        }
        let hook: Hook = serde_json::from_value(payload.clone())
            .map_err(|e| HookError::permanent(format!("the {action} payload is not a hook: {e}")))?;
        let outcome = match action {
            "on_start" => self.plugin.on_start(&hook).await,
            "before_end" => self.plugin.before_end(&hook).await,
            "on_end" => self.plugin.on_end(&hook).await,
            "on_update" => self.plugin.on_update(&hook).await,
            "on_heal" => self.plugin.on_heal(&hook).await,
            other => return Err(HookError::permanent(format!("unknown action {other:?}"))),
        }?;
        serde_json::to_value(outcome).map_err(|e| HookError::permanent(format!("encoding: {e}")))
    }
}

/// Answers the one call on stdin, as an exec plugin: the answer on stdout
/// and exit 0; a refusal as `{"error": …}` and exit 2; another failure
/// exit 1. Returns the exit status.
pub async fn serve_exec(plugin: Arc<dyn ResourcePlugin>) -> i32 {
    let mut input = String::new();
    let (status, answer) = match std::io::stdin().read_to_string(&mut input) {
        Err(e) => (1, json!({"error": format!("reading stdin: {e}")})),
        Ok(_) => match serde_json::from_str::<Envelope>(&input) {
            Err(e) => (EXIT_PERMANENT, json!({"error": format!("bad call: {e}")})),
            Ok(call) => {
                let driver = PluginDriver::new(plugin);
                match driver.call(&call.action, &call.payload, &call.idempotency_key).await {
                    Ok(answer) => (0, answer),
                    Err(e) if e.permanent => (EXIT_PERMANENT, json!({"error": e.message})),
                    Err(e) => (1, json!({"error": e.message})),
                }
            }
        },
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{answer}").and_then(|()| out.flush()).is_err() {
        return 1;
    }
    status
}
