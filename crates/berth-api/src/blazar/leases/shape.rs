//! A lease as Blazar shows it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_app::leases::{Created, Lease, TransferOffer};
use berth_core::dates::format_date;
use berth_core::lease::LeaseEventType;
use serde_json::{json, Value};

use crate::blazar::idempotency;

/// The lease as Blazar shows it.
pub(in crate::blazar) fn lease_json(l: &Lease) -> Value {
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
    let mut out = json!({
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
        // The zone a recurring lease's schedule was read in (UTC where it
        // named none); null for a lease that does not recur.
        "time_zone": r.recurrence_id.map(|_| r.time_zone.as_deref().unwrap_or("UTC")),
        "created_at": format_date(l.created_at),
        "updated_at": format_date(l.updated_at),
        "reservations": reservations,
        "events": events,
        // The projects that may draw from it (`PUT .../shared_with`).
        "shared_with": l.shared_with,
    });
    if let Some(t) = &l.transfer {
        out["transfer"] = transfer_json(t);
    }
    out
}

/// A pending transfer as a lease shows it.
pub(in crate::blazar) fn transfer_json(t: &TransferOffer) -> Value {
    json!({"to_project": t.to_project, "offered_by": t.offered_by, "offered_at": format_date(t.offered_at)})
}

/// A create's answer: the occurrences of a dry run, or the lease (the
/// first, when recurring, with the recurrence's leases).
pub(super) fn created(made: Created) -> Response {
    match made {
        Created::DryRun(windows) => {
            let out: Vec<Value> = windows
                .iter()
                .map(|w| json!({"start_date": format_date(w.start), "end_date": format_date(w.end), "fits": w.fits}))
                .collect();
            let body = json!({"dry_run": true, "count": out.len(), "occurrences": out});
            (StatusCode::OK, Json(body)).into_response()
        }
        Created::Made { leases, replayed } => {
            let mut out = lease_json(&leases[0]);
            if leases.len() > 1 {
                let ids: Vec<_> = leases.iter().map(|l| l.record.id).collect();
                out["recurrence"] = json!({"id": leases[0].record.recurrence_id, "leases": ids});
            }
            idempotency::created(json!({ "lease": out }), replayed)
        }
    }
}
