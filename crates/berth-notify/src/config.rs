//! `[notifications]`: where lease notifications go and how delivery retries.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationsConfig {
    /// Where each notification goes; none: no notifier runs.
    pub sinks: Vec<SinkConfig>,
    /// Blazar's `[notifications] publisher_id`.
    pub publisher_id: String,
    /// How often the log is read for new lease events.
    pub poll_interval_ms: u64,
    /// The first wait after a failed delivery; it doubles up to `retry_max_ms`.
    pub retry_min_ms: u64,
    pub retry_max_ms: u64,
    /// Attempts at a notification a sink refuses outright (a 4xx other than
    /// 408 and 429) before it is dropped for that sink; a sink that is down
    /// or slow is retried until it takes it.
    pub max_refused_attempts: usize,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            sinks: Vec::new(),
            publisher_id: "blazar.lease".into(),
            poll_interval_ms: 500,
            retry_min_ms: 500,
            retry_max_ms: 60_000,
            max_refused_attempts: 5,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SinkConfig {
    /// A line per notification, target `berth::notifications`, level info.
    Log,
    /// A POST of the notification as JSON, signed as the plugins' webhook
    /// driver signs (`X-Berth-Signature`).
    Webhook {
        url: String,
        #[serde(default)]
        secret: Option<String>,
        #[serde(default = "default_timeout_ms")]
        timeout_ms: u64,
    },
}

fn default_timeout_ms() -> u64 {
    5_000
}

impl NotificationsConfig {
    /// The bounds (the sinks are checked by [`crate::check`]).
    pub fn check(&self) -> Result<(), String> {
        if self.poll_interval_ms == 0 || self.retry_min_ms == 0 {
            return Err("poll_interval_ms and retry_min_ms must be more than 0".into());
        }
        if self.retry_max_ms < self.retry_min_ms {
            return Err("retry_max_ms must be at least retry_min_ms".into());
        }
        if self.max_refused_attempts == 0 {
            return Err("max_refused_attempts must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<NotificationsConfig, String> {
        serde_json::from_value(toml_text.parse::<serde_json::Value>().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn sinks_read_and_unknown_keys_are_refused() {
        let c =
            parse(r#"{"sinks": [{"kind": "log"}, {"kind": "webhook", "url": "http://x/", "secret": "s"}]}"#).unwrap();
        assert_eq!(c.sinks.len(), 2);
        assert_eq!(
            c.sinks[1],
            SinkConfig::Webhook { url: "http://x/".into(), secret: Some("s".into()), timeout_ms: 5000 }
        );
        assert!(parse(r#"{"sinks": [{"kind": "webhook", "url": "http://x/", "secrit": "s"}]}"#).is_err());
        assert!(parse(r#"{"sinks": [{"kind": "email"}]}"#).is_err());
        assert!(parse(r#"{"retries": 3}"#).is_err());
        crate::check(&c).unwrap();
        let bad = parse(r#"{"sinks": [{"kind": "webhook", "url": "ftp://x/"}]}"#).unwrap();
        assert!(crate::check(&bad).is_err());
        assert!(crate::check(&parse(r#"{"retry_min_ms": 10, "retry_max_ms": 5}"#).unwrap()).is_err());
    }
}
