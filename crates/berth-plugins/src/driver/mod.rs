//! Drivers: how a plugin's effects reach the outside world.
//!
//! A driver takes an action name, a JSON payload and an idempotency key, and
//! answers JSON or a [`HookError`] saying whether a retry may help. The key is
//! the caller's: the manager sends the same key on every attempt of the same
//! lease event, and every driver passes it on so the far side can apply each
//! effect once. Drivers never retry by themselves; retrying (with backoff) is
//! the caller's decision, made from [`HookError::permanent`].
//!
//! The wire protocol of the `webhook` and `exec` drivers is documented in
//! `docs/plugins.md`.

mod exec;
mod noop;
mod openstack;
mod webhook;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use berth_core::error::ErrorCode;
use serde::{Deserialize, Serialize};

use crate::plugin::HookError;

pub use exec::ExecDriver;
pub use noop::NoopDriver;
pub use openstack::{OpenStackConfig, OpenStackDriver};
pub use webhook::{sign, WebhookDriver, ACTION_HEADER, IDEMPOTENCY_KEY_HEADER, SIGNATURE_HEADER};

/// Carries one action to the outside world.
#[async_trait]
pub trait Driver: Send + Sync {
    /// Which driver this is (`noop`, `webhook`, `exec`), for logs.
    fn kind(&self) -> &'static str;

    /// Performs `action` with `payload`. Returns the far side's JSON answer
    /// (`null` when it said nothing). The same `idempotency_key` on a later
    /// call means "the same effect again": the far side should apply it once.
    async fn call(
        &self,
        action: &str,
        payload: &serde_json::Value,
        idempotency_key: &str,
    ) -> Result<serde_json::Value, HookError>;
}

/// The JSON document both the `webhook` (as the request body) and the `exec`
/// (on stdin) drivers send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub action: String,
    pub idempotency_key: String,
    pub payload: serde_json::Value,
}

/// Default time a driver call may take before it counts as failed (retryable).
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

impl ExecConfig {
    /// The program is an executable file: a path, or a bare name found on
    /// `PATH`. Checked at start (and by `berthd check-config`) rather than
    /// at the first lease that needs it.
    pub fn check_program(&self) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let program = &self.program;
        let candidates: Vec<PathBuf> = if program.components().count() > 1 || program.is_absolute() {
            vec![program.clone()]
        } else {
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).map(|d| d.join(program)).collect())
                .unwrap_or_default()
        };
        let found = candidates.iter().find_map(|c| std::fs::metadata(c).ok().map(|meta| (c, meta)));
        let Some((path, meta)) = found else {
            return Err(format!("does not exist{}", if candidates.len() == 1 { "" } else { " on PATH" }));
        };
        if !meta.is_file() {
            return Err(format!("{} is not a file", path.display()));
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(format!("{} is not executable (chmod +x)", path.display()));
        }
        Ok(())
    }
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// A driver as the configuration names it, e.g.
/// `{"driver": "webhook", "url": "https://…", "secret": "…", "timeout_ms": 5000}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "driver", rename_all = "snake_case", deny_unknown_fields)]
pub enum DriverConfig {
    /// Logs each call and answers a record of what it would have done.
    #[default]
    Noop,
    Webhook(WebhookConfig),
    Exec(ExecConfig),
    /// Nova, for the built-in plugins (`driver/openstack.rs`).
    Openstack(Box<OpenStackConfig>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// `http://` or `https://` URL every call is POSTed to.
    pub url: String,
    /// Key of the HMAC-SHA256 body signature; without it no signature header
    /// is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Extra headers sent on every call (e.g. an authorization token).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecConfig {
    /// The program to run (a path, or a name looked up on `PATH`).
    pub program: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables added to the inherited environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory; the daemon's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// After this the program (and every process it started in its process
    /// group) is killed and the call fails, retryably.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

impl DriverConfig {
    /// Builds the driver, checking what can be checked before the first call
    /// (the URL parses, the timeout is not zero).
    pub fn build(&self) -> Result<Arc<dyn Driver>, berth_core::Error> {
        Ok(match self {
            DriverConfig::Noop => Arc::new(NoopDriver::new()),
            DriverConfig::Webhook(c) => Arc::new(WebhookDriver::new(c.clone())?),
            DriverConfig::Exec(c) => Arc::new(ExecDriver::new(c.clone())?),
            DriverConfig::Openstack(c) => Arc::new(OpenStackDriver::new((**c).clone())?),
        })
    }
}

fn config_error(detail: impl Into<String>) -> berth_core::Error {
    berth_core::Error::invalid(ErrorCode::Invalid, detail)
}

/// The message a failed call carries: the far side's `{"error": "…"}` when it
/// answered one, else its text, cut to a size fit for a log event.
pub(crate) fn failure_text(body: &[u8]) -> String {
    const MAX: usize = 2000;
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "no message".to_string();
    }
    let msg = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(o)) => match o.get("error") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => text.to_string(),
        },
        _ => text.to_string(),
    };
    if msg.len() > MAX {
        let mut cut = MAX;
        while !msg.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &msg[..cut])
    } else {
        msg
    }
}

/// A successful answer: nothing (or only whitespace) is `null`; anything else
/// must be JSON. A far side that reports success in something else is broken
/// in a way a retry will not fix.
pub(crate) fn parse_answer(body: &[u8], what: &str) -> Result<serde_json::Value, HookError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| {
        HookError::permanent(format!("answered success, but not in JSON: {e}: {} ({what})", failure_text(body)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_from_json_as_documented() {
        let c: DriverConfig = serde_json::from_value(serde_json::json!({
            "driver": "webhook", "url": "http://127.0.0.1:9/x", "secret": "s", "timeout_ms": 500
        }))
        .unwrap();
        assert_eq!(
            c,
            DriverConfig::Webhook(WebhookConfig {
                url: "http://127.0.0.1:9/x".into(),
                secret: Some("s".into()),
                timeout_ms: 500,
                headers: BTreeMap::new()
            })
        );
        let c: DriverConfig =
            serde_json::from_value(serde_json::json!({"driver": "exec", "program": "/bin/true"})).unwrap();
        match c {
            DriverConfig::Exec(e) => assert_eq!(e.timeout_ms, DEFAULT_TIMEOUT_MS),
            other => panic!("{other:?}"),
        }
        let c: DriverConfig = serde_json::from_value(serde_json::json!({"driver": "noop"})).unwrap();
        assert_eq!(c, DriverConfig::Noop);
        // A misspelt field is an error, not a silently ignored setting.
        assert!(serde_json::from_value::<DriverConfig>(serde_json::json!({
            "driver": "webhook", "url": "http://x", "secrte": "s"
        }))
        .is_err());
        assert!(serde_json::from_value::<DriverConfig>(serde_json::json!({"driver": "carrier-pigeon"})).is_err());
    }

    #[test]
    fn bad_configs_fail_to_build() {
        let bad_url = DriverConfig::Webhook(WebhookConfig {
            url: "not a url".into(),
            secret: None,
            timeout_ms: 100,
            headers: BTreeMap::new(),
        });
        assert!(bad_url.build().is_err());
        let zero = DriverConfig::Exec(ExecConfig {
            program: "/bin/true".into(),
            args: vec![],
            env: BTreeMap::new(),
            cwd: None,
            timeout_ms: 0,
        });
        assert!(zero.build().is_err());
    }

    #[test]
    fn failure_text_prefers_the_error_field_and_is_bounded() {
        assert_eq!(failure_text(br#"{"error":"no more addresses"}"#), "no more addresses");
        assert_eq!(failure_text(b"  plain words\n"), "plain words");
        let long = "é".repeat(3000);
        let t = failure_text(long.as_bytes());
        assert!(t.len() <= 2003 + 3, "{}", t.len());
    }

    #[test]
    fn answers_empty_is_null_and_non_json_is_permanent() {
        assert_eq!(parse_answer(b" \n", "x").unwrap(), serde_json::Value::Null);
        assert_eq!(parse_answer(br#"{"a":1}"#, "x").unwrap(), serde_json::json!({"a": 1}));
        let e = parse_answer(b"OK", "x").unwrap_err();
        assert!(e.permanent);
    }
}
