//! The `on_update` calls owed after a started lease's sharing changed
//! (`berth_store::commands::UpdateHook`), made in healing's pass (`heal::kick`:
//! a new one notifies the manager as an `on_heal` call does; and at every
//! poll). Each carries the key `update:<id>` on every attempt; a retryable
//! failure is tried again at the next pass, a permanent one is recorded as
//! failed. A call whose lease has ended since is recorded without a call.

use berth_core::lease_event::HookResult;
use berth_plugins::Hook;
use berth_store::commands::UpdateHook;
use serde_json::json;

use crate::hooks::{allocations_json, lease_json, reservation_json};
use crate::state::Inner;

/// Makes the `on_update` calls due, oldest first.
pub(crate) async fn call_due(inner: &Inner) {
    match inner.store.update_hooks_due().await {
        Ok(due) => {
            for h in due {
                call(inner, h).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "reading the on_update calls owed"),
    }
}

/// One `on_update` call, and its outcome recorded.
async fn call(inner: &Inner, h: UpdateHook) {
    let result = if h.moot { Some(Vec::new()) } else { outcome(inner, &h).await };
    let Some(hooks) = result else { return };
    match inner.store.finish_update_hook(&format!("manager:{}", inner.id), h.id, hooks).await {
        Ok(_) => tracing::info!(update = %h.id, lease = %h.lease, "on_update made"),
        Err(e) => tracing::warn!(update = %h.id, error = %e, "recording on_update"),
    }
}

/// What the plugin answered, to record; None to try again later (a
/// retryable failure, or the lease could not be read).
async fn outcome(inner: &Inner, h: &UpdateHook) -> Option<Vec<HookResult>> {
    let ctx = match inner.store.hook_contexts(&[h.lease]).await {
        Ok(mut c) => c.remove(&h.lease)?,
        Err(e) => {
            tracing::warn!(error = %e, update = %h.id, "reading the shared lease");
            return None;
        }
    };
    let Some(r) = ctx.lease.reservations.iter().find(|r| r.id == h.reservation) else {
        // The reservation is gone: nothing to tell.
        return Some(Vec::new());
    };
    let hook = Hook {
        event_type: "update_lease".into(),
        idempotency_key: format!("update:{}", h.id),
        attempt: 1,
        lease: lease_json(&ctx),
        reservation: reservation_json(ctx.lease.id, r),
        allocations: allocations_json(&ctx, r),
    };
    let answer = match inner.registry.get(&r.resource_type) {
        Ok(plugin) => plugin.on_update(&hook).await,
        Err(e) => Err(berth_plugins::HookError::permanent(e.detail)),
    };
    let (resource_type, reservation) = (r.resource_type.clone(), r.id);
    Some(vec![match answer {
        Ok(mut o) => {
            o.effects.extend(berth_core::lease_event::reported_failures(&o.detail));
            HookResult { reservation, resource_type, ok: true, detail: o.detail, effects: o.effects }
        }
        Err(e) if !e.permanent => {
            tracing::info!(update = %h.id, error = %e.message, "on_update failed; will try again");
            return None;
        }
        Err(e) => HookResult {
            reservation,
            resource_type,
            ok: false,
            detail: json!({"error": e.message, "permanent": true}),
            effects: Vec::new(),
        },
    }])
}
