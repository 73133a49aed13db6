//! The `noop` driver: acts on nothing, logs, and answers what it would have done.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::json;

use super::Driver;
use crate::plugin::HookError;

#[derive(Debug, Default)]
pub struct NoopDriver {
    calls: AtomicU64,
}

impl NoopDriver {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many calls it has answered (a cheap count, for tests and benches).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Driver for NoopDriver {
    fn kind(&self) -> &'static str {
        "noop"
    }

    async fn call(
        &self,
        action: &str,
        payload: &serde_json::Value,
        idempotency_key: &str,
    ) -> Result<serde_json::Value, HookError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        tracing::info!(driver = "noop", action, idempotency_key, "would act");
        Ok(json!({
            "driver": "noop",
            "action": action,
            "idempotency_key": idempotency_key,
            "payload": payload,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_a_record_of_the_call() {
        let d = NoopDriver::new();
        let out = d.call("wake_up", &json!({"instance": "i-1"}), "k-1").await.unwrap();
        assert_eq!(
            out,
            json!({"driver": "noop", "action": "wake_up", "idempotency_key": "k-1", "payload": {"instance": "i-1"}})
        );
        assert_eq!(d.calls(), 1);
    }
}
