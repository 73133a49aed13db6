//! The lease bodies as the operations take them.

use berth_app::leases::{CreateLease, LeaseChange, NewReservation, Recurrence, RequestKey, ReservationChange};

use berth_core::error::ErrorCode;
use serde_json::{Map, Value};

use crate::blazar::bodies;
use crate::error::ApiError;

/// The reservations a body asks for.
pub(in crate::blazar) fn reservations(list: Option<Vec<bodies::NewReservation>>) -> Vec<NewReservation> {
    let each = |r: bodies::NewReservation| NewReservation { resource_type: r.resource_type, params: r.params };
    list.unwrap_or_default().into_iter().map(each).collect()
}

/// The keys a lease body may give beside `offer`: an offer books its own
/// window and reservations.
const BESIDE_OFFER: &[&str] = &["offer", "name"];

/// `POST /v1/leases`, with the request's key and the configured bound on
/// occurrences; a body booking an offer gives nothing else but a name.
pub(super) fn create(
    obj: &Map<String, Value>,
    asked: bodies::NewLease,
    key: Option<RequestKey>,
    max_occurrences: usize,
) -> Result<CreateLease, ApiError> {
    if asked.offer.is_some() {
        if let Some(k) = obj.keys().find(|k| !BESIDE_OFFER.contains(&k.as_str())) {
            let m = format!("{k} cannot be given with offer: an offer books its own window and reservations");
            return Err(ApiError::bad_request(ErrorCode::InvalidLease, m));
        }
    }
    Ok(CreateLease {
        name: asked.name,
        start_date: asked.start_date,
        end_date: asked.end_date,
        before_end_date: asked.before_end_date,
        reservations: reservations(asked.reservations),
        recurrence: asked.recurrence.map(|r| Recurrence {
            cron: r.cron,
            duration: r.duration.0,
            until: r.until,
            time_zone: r.time_zone,
        }),
        dry_run: asked.dry_run.unwrap_or(false),
        key,
        max_occurrences,
        offer: asked.offer,
    })
}

/// `PUT /v1/leases/{id}`.
pub(super) fn change(asked: bodies::LeaseChange) -> LeaseChange {
    let each = |r: bodies::ReservationChange| ReservationChange { id: r.id, params: r.params };
    LeaseChange {
        name: asked.name,
        start_date: asked.start_date,
        end_date: asked.end_date,
        before_end_date: asked.before_end_date,
        prolong_for: asked.prolong_for.map(|d| d.0),
        reduce_by: asked.reduce_by.map(|d| d.0),
        defer_by: asked.defer_by.map(|d| d.0),
        advance_by: asked.advance_by.map(|d| d.0),
        reservations: asked.reservations.unwrap_or_default().into_iter().map(each).collect(),
    }
}
