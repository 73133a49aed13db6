//! One attempt at a lease event: a hook per reservation, through its plugin.

use berth_core::dates::format_date;
use berth_core::lease::{LeaseEventType, ReservationRecord};
use berth_core::lease_event::HookResult;
use berth_plugins::{Hook, HookError, Registry};
use berth_store::commands::Claim;
use berth_store::queries::lease_events::HookContext;
use serde_json::{json, Value};

/// The hook key of one reservation in one lease event: the same on every
/// attempt and in every berthd, never carrying the attempt number.
pub fn idempotency_key(claim: &Claim, reservation: &ReservationRecord) -> String {
    format!("{}:{}", claim.event, reservation.id)
}

/// The lease as hooks see it.
pub(crate) fn lease_json(ctx: &HookContext) -> Value {
    let r = &ctx.lease;
    json!({
        "id": r.id,
        "name": r.name,
        "project_id": r.project_id,
        "user_id": r.user_id,
        "start_date": format_date(r.start),
        "end_date": format_date(r.end),
        "status": r.status.as_str(),
        "degraded": r.degraded,
        // The projects that may draw from it (docs/sharing.md).
        "shared_with": ctx.shared_with,
    })
}

/// The reservation as hooks see it: its parameters as given, with its id,
/// type, pool (`resource_id`) and status.
pub(crate) fn reservation_json(lease: uuid::Uuid, r: &ReservationRecord) -> Value {
    let mut o = r.params.as_object().cloned().unwrap_or_default();
    o.insert("id".into(), json!(r.id));
    o.insert("lease_id".into(), json!(lease));
    o.insert("resource_type".into(), json!(r.resource_type));
    o.insert("resource_id".into(), json!(r.resource_id));
    o.insert("status".into(), json!(r.status.as_str()));
    Value::Object(o)
}

/// What the reservation holds; for whole hosts, with the other consumers on
/// each (what an end policy acts on).
pub(crate) fn allocations_json(ctx: &HookContext, r: &ReservationRecord) -> Vec<Value> {
    let hosts = r.resource_type == berth_plugins::host::RESOURCE_TYPE;
    r.slots
        .iter()
        .map(|s| {
            let mut a = json!({
                "resource_provider": {"uuid": s.provider, "name": ctx.provider_names.get(&s.provider)},
                "consumer_id": s.consumer,
                "resources": s.resources,
            });
            if hosts {
                a["other_consumers"] = ctx
                    .others
                    .iter()
                    .filter(|o| o.provider == s.provider)
                    .map(|o| json!({"consumer_id": o.consumer, "project_id": o.project_id, "resources": o.resources}))
                    .collect();
            }
            a
        })
        .collect()
}

/// How an attempt went, reservation by reservation.
pub struct Attempt {
    pub hooks: Vec<HookResult>,
    /// The first permanent failure, if any.
    pub permanent: Option<String>,
    /// Every failure's message, for `last_error`.
    pub errors: Vec<String>,
}

/// Runs the claimed event's hook for every reservation of the lease, in the
/// lease's order. Every reservation is tried even after one fails, so that
/// an event that ends ERROR still records what did happen.
pub async fn attempt(registry: &Registry, claim: &Claim, ctx: &HookContext) -> Attempt {
    let lease = lease_json(ctx);
    let mut out = Attempt { hooks: Vec::new(), permanent: None, errors: Vec::new() };
    for r in &ctx.lease.reservations {
        let hook = Hook {
            event_type: claim.event_type.as_str().to_string(),
            idempotency_key: idempotency_key(claim, r),
            attempt: claim.attempt.max(1) as u32,
            lease: lease.clone(),
            reservation: reservation_json(ctx.lease.id, r),
            allocations: allocations_json(ctx, r),
        };
        let result = match registry.get(&r.resource_type) {
            Err(e) => {
                Err(HookError::permanent(format!("resource type {} is not enabled: {}", r.resource_type, e.detail)))
            }
            Ok(plugin) => match claim.event_type {
                LeaseEventType::StartLease => plugin.on_start(&hook).await,
                LeaseEventType::BeforeEndLease => plugin.before_end(&hook).await,
                LeaseEventType::EndLease => plugin.on_end(&hook).await,
            },
        };
        match result {
            Ok(mut o) => {
                // A plugin reports failed hosts in its answer.
                o.effects.extend(berth_core::lease_event::reported_failures(&o.detail));
                out.hooks.push(HookResult {
                    reservation: r.id,
                    resource_type: r.resource_type.clone(),
                    ok: true,
                    detail: o.detail,
                    effects: o.effects,
                })
            }
            Err(e) => {
                let message = format!("{} ({}): {}", r.resource_type, r.id, e.message);
                if e.permanent && out.permanent.is_none() {
                    out.permanent = Some(message.clone());
                }
                out.errors.push(message.clone());
                out.hooks.push(HookResult {
                    reservation: r.id,
                    resource_type: r.resource_type.clone(),
                    ok: false,
                    detail: json!({"error": e.message, "permanent": e.permanent}),
                    effects: Vec::new(),
                });
            }
        }
    }
    out
}
