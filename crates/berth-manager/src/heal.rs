//! Healing's chores: the `on_heal` calls owed to plugins after a heal moved
//! slots of a started lease (made as soon as a notification wakes the
//! manager: a new one notifies it; and at every poll), and the retry of
//! heals that found no host, on every sweep while some reservation is
//! missing resources (a host may have freed: a lease ended or was deleted,
//! a host was enabled or enrolled).
//!
//! An `on_heal` call carries the key `heal:<id>` on every attempt; a
//! retryable failure is tried again at the next notification or poll, a
//! permanent one is recorded as failed. Two managers may both make one call
//! before either records it (as with returned hosts): the far side applies
//! a key once.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use berth_core::lease_event::HookResult;
use berth_core::EventMeta;
use berth_plugins::Hook;
use berth_store::commands::HealHook;
use serde_json::json;

use crate::hooks::{lease_json, reservation_json};
use crate::state::Inner;

/// Makes the `on_heal` calls owed, then the `on_update` ones
/// (`crate::update`), in the background, one pass at a time.
pub(crate) fn kick(inner: &Arc<Inner>) {
    if inner.healing.swap(true, Ordering::SeqCst) {
        return;
    }
    let inner = inner.clone();
    tokio::spawn(async move {
        match inner.store.heal_hooks_due().await {
            Ok(due) => {
                for h in due {
                    call(&inner, h).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading the on_heal calls owed"),
        }
        // The on_update calls owed after a share wake the manager alike.
        crate::update::call_due(&inner).await;
        inner.healing.store(false, Ordering::SeqCst);
    });
}

/// One `on_heal` call, and its outcome recorded.
async fn call(inner: &Inner, h: HealHook) {
    let ctx = match inner.store.hook_contexts(&[h.lease]).await {
        Ok(mut c) => match c.remove(&h.lease) {
            Some(ctx) => ctx,
            None => return,
        },
        Err(e) => return tracing::warn!(error = %e, heal = %h.id, "reading the healed lease"),
    };
    let Some(r) = ctx.lease.reservations.iter().find(|r| r.id == h.reservation) else {
        return;
    };
    let name = |p: &uuid::Uuid| h.names.get(p).cloned();
    let hook = Hook {
        event_type: "heal_lease".into(),
        idempotency_key: format!("heal:{}", h.id),
        attempt: 1,
        lease: lease_json(&ctx),
        reservation: reservation_json(ctx.lease.id, r),
        allocations: h
            .moves
            .iter()
            .map(|m| {
                json!({
                    "resource_provider": {"uuid": m.to, "name": name(&m.to)},
                    "consumer_id": m.consumer,
                    "resources": m.resources,
                    "replaces": {"uuid": m.from, "name": name(&m.from)},
                })
            })
            .collect(),
    };
    let outcome = match inner.registry.get(&r.resource_type) {
        Ok(plugin) => plugin.on_heal(&hook).await,
        Err(e) => Err(berth_plugins::HookError::permanent(e.detail)),
    };
    let result = match outcome {
        Ok(mut o) => {
            o.effects.extend(berth_core::lease_event::reported_failures(&o.detail));
            HookResult {
                reservation: r.id,
                resource_type: r.resource_type.clone(),
                ok: true,
                detail: o.detail,
                effects: o.effects,
            }
        }
        Err(e) if !e.permanent => {
            return tracing::info!(heal = %h.id, error = %e.message, "on_heal failed; will try again");
        }
        Err(e) => HookResult {
            reservation: r.id,
            resource_type: r.resource_type.clone(),
            ok: false,
            detail: json!({"error": e.message, "permanent": true}),
            effects: Vec::new(),
        },
    };
    match inner.store.finish_heal_hook(&format!("manager:{}", inner.id), h.id, vec![result]).await {
        Ok(_) => tracing::info!(heal = %h.id, lease = %h.lease, "on_heal made"),
        Err(e) => tracing::warn!(heal = %h.id, error = %e, "recording on_heal"),
    }
}

/// Heals again what is still on unusable hosts or missing resources,
/// when some such reservation may be healed (berth-app asks their plugins
/// what each needs, as a host disabled through the API does).
pub(crate) async fn retry(inner: &Inner) {
    let meta = EventMeta {
        actor: Some(format!("manager:{}", inner.id)),
        causation: Some("heal".into()),
        ..Default::default()
    };
    match inner.app.heal_waiting(&meta).await {
        Ok(done) => {
            for o in done.iter().flatten().filter(|o| o.moved > 0) {
                tracing::info!(lease = %o.lease, reservation = %o.reservation, moved = o.moved, "healed");
            }
        }
        Err(e) => tracing::warn!(error = %e, "healing"),
    }
}
