//! Reclaiming lent capacity: on every sweep (and wake), the loans whose
//! reclaim is due (berth-store `commands::loans`) are claimed, their
//! instances emptied through the `virtual:instance` plugin's `on_reclaim`,
//! and the outcome recorded. One call per loan, keyed `reclaim:<consumer>:
//! <lent at>` on every attempt; a retryable failure is tried again when its
//! claim lapses, a permanent one is recorded (the loan's reclaim is ERROR).
//! The owner's lease events never wait on a reclaim.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use berth_plugins::Hook;
use berth_store::commands::Reclaim;
use serde_json::json;

use crate::metrics;
use crate::state::Inner;

/// How long a manager's claim of a reclaim holds: a retryable failure is
/// tried again after it.
const CLAIM_TTL: chrono::Duration = chrono::Duration::seconds(10);

/// Most reclaims claimed at once.
const BATCH: i64 = 64;

/// Makes the reclaims due, in the background, one pass at a time.
pub(crate) fn kick(inner: &Arc<Inner>) {
    if inner.reclaiming.swap(true, Ordering::SeqCst) {
        return;
    }
    let inner = inner.clone();
    tokio::spawn(async move {
        let by = format!("manager:{}", inner.id);
        loop {
            match inner.store.claim_reclaims(&by, CLAIM_TTL, BATCH).await {
                Ok(due) if due.is_empty() => break,
                Ok(due) => {
                    let full = due.len() as i64 == BATCH;
                    for r in due {
                        call(&inner, &by, r).await;
                    }
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "claiming the reclaims due");
                    break;
                }
            }
        }
        inner.reclaiming.store(false, Ordering::SeqCst);
    });
}

/// One loan's `on_reclaim`, and its outcome recorded.
async fn call(inner: &Inner, by: &str, r: Reclaim) {
    let hook = Hook {
        event_type: "reclaim".into(),
        idempotency_key: format!("reclaim:{}:{}", r.consumer, r.lent_at.timestamp_micros()),
        attempt: 1,
        lease: serde_json::Value::Null,
        reservation: json!({"resource_type": berth_plugins::instance::RESOURCE_TYPE, "preemptible": true}),
        allocations: r
            .holds
            .iter()
            .map(|(uuid, name, class, used)| {
                json!({
                    "consumer_id": r.consumer,
                    "instance_id": r.consumer.to_string(),
                    "project_id": r.project_id,
                    "user_id": r.user_id,
                    "resource_provider": {"uuid": uuid, "name": name},
                    "resources": {class: used},
                    "reclaim_at": r.until,
                })
            })
            .collect(),
    };
    let outcome = match inner.registry.get(berth_plugins::instance::RESOURCE_TYPE) {
        Ok(plugin) => plugin.on_reclaim(&hook).await,
        Err(e) => Err(berth_plugins::HookError::permanent(e.detail)),
    };
    let (done, detail) = match outcome {
        Ok(o) => (true, o.detail),
        Err(e) if !e.permanent => {
            metrics::reclaim_retrying();
            return tracing::info!(consumer = %r.consumer, error = %e.message, "on_reclaim failed; will try again");
        }
        Err(e) => (false, json!({"error": e.message, "permanent": true})),
    };
    match inner.store.finish_reclaim(by, r.consumer, done, detail).await {
        Ok(true) => {
            let now = inner.store.now().await.unwrap_or(r.until);
            let lag = (now - r.until).num_milliseconds() as f64 / 1000.0;
            metrics::reclaimed(done, lag, &r.holds);
            tracing::info!(consumer = %r.consumer, done, "loan reclaimed");
        }
        Ok(false) => {}
        Err(e) => tracing::warn!(consumer = %r.consumer, error = %e, "recording a reclaim"),
    }
}
