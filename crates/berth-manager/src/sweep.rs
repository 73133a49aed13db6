//! Periodic chores, run in the background at most once at a time: the
//! gauges of due events and of the pause, recycled hosts whose time to return has come,
//! and heals retried.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use berth_plugins::Hook;

use crate::metrics;
use crate::state::Inner;

/// Periodic chores, in the background: the gauge of due events, and hosts
/// held back at a lease's end whose time to return has come.
pub(crate) fn sweep(inner: &Arc<Inner>) {
    if inner.sweeping.swap(true, Ordering::SeqCst) {
        return;
    }
    let inner = inner.clone();
    tokio::spawn(async move {
        if let Ok(now) = inner.store.lease_events_due().await {
            metrics::due(now.due, now.paused);
        }
        if let Ok(lent) = inner.store.lent_now().await {
            metrics::lent(&lent);
        }
        match inner.store.held_hosts_due().await {
            Ok(held) => {
                for h in held {
                    return_host(&inner, h).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading held hosts"),
        }
        crate::heal::retry(&inner).await;
        inner.sweeping.store(false, Ordering::SeqCst);
    });
}

/// A recycled host due back: the host plugin acts (deletes whoever is still
/// on it), then the host goes back to the free pool.
async fn return_host(inner: &Inner, h: berth_store::commands::HeldHost) {
    let Ok(plugin) = inner.registry.get(berth_plugins::host::RESOURCE_TYPE) else {
        return;
    };
    let hook = Hook {
        event_type: "return_hosts".into(),
        idempotency_key: format!("return:{}:{}", h.lease, h.provider),
        attempt: 1,
        lease: serde_json::json!({"id": h.lease}),
        reservation: serde_json::json!({"resource_type": berth_plugins::host::RESOURCE_TYPE}),
        allocations: vec![serde_json::json!({
            "resource_provider": {"uuid": h.provider, "name": h.name},
            "other_consumers": h.others.iter().map(|c| serde_json::json!({"consumer_id": c})).collect::<Vec<_>>(),
        })],
    };
    match plugin.on_return(&hook).await {
        Ok(outcome) => {
            match inner.store.return_held_host(&format!("manager:{}", inner.id), h.provider, &outcome.effects).await {
                Ok(true) => tracing::info!(host = %h.name, "recycled host back in the free pool"),
                Ok(false) => {}
                Err(e) => tracing::warn!(host = %h.name, error = %e, "returning a recycled host"),
            }
        }
        Err(e) => tracing::warn!(host = %h.name, error = %e.message, "returning a recycled host; will try again"),
    }
}
