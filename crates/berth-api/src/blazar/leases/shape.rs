//! A lease as Blazar shows it.

use berth_core::dates::format_date;
use berth_core::lease::LeaseEventType;
use berth_store::queries::leases::Lease;
use serde_json::{json, Value};

/// The lease as Blazar shows it.
pub(super) fn lease_json(l: &Lease) -> Value {
    let r = &l.record;
    let reservations: Vec<Value> = r
        .reservations
        .iter()
        .zip(&l.reservation_updated_at)
        .map(|(res, updated)| {
            let mut o = res.params.as_object().cloned().unwrap_or_default();
            o.insert("id".into(), json!(res.id));
            o.insert("lease_id".into(), json!(r.id));
            o.insert("resource_type".into(), json!(res.resource_type));
            o.insert("resource_id".into(), json!(res.resource_id));
            o.insert("status".into(), json!(res.status.as_str()));
            o.insert("missing_resources".into(), json!(res.missing_resources));
            o.insert("resources_changed".into(), json!(res.resources_changed));
            o.insert("created_at".into(), json!(format_date(res.created_at)));
            o.insert("updated_at".into(), json!(format_date(*updated)));
            o.insert(
                "allocations".into(),
                json!(res
                    .slots
                    .iter()
                    .map(|s| json!({"resource_id": s.provider, "consumer_id": s.consumer, "resources": s.resources}))
                    .collect::<Vec<_>>()),
            );
            Value::Object(o)
        })
        .collect();
    let events: Vec<Value> = r
        .events
        .iter()
        .zip(&l.event_details)
        .map(|(e, d)| {
            json!({
                "id": e.id,
                "lease_id": r.id,
                "event_type": e.event_type.as_str(),
                "time": format_date(e.time),
                "status": e.status.as_str(),
                "attempts": d.attempts,
                "last_error": d.last_error,
                "created_at": format_date(d.created_at),
                "updated_at": format_date(d.updated_at),
            })
        })
        .collect();
    json!({
        "id": r.id,
        "name": r.name,
        "start_date": format_date(r.start),
        "end_date": format_date(r.end),
        "before_end_date": r.event(LeaseEventType::BeforeEndLease).map(|e| format_date(e.time)),
        "status": r.status.as_str(),
        "degraded": r.degraded,
        "user_id": r.user_id,
        "project_id": r.project_id,
        "trust_id": null,
        "recurrence_id": r.recurrence_id,
        "created_at": format_date(l.created_at),
        "updated_at": format_date(l.updated_at),
        "reservations": reservations,
        "events": events,
    })
}
