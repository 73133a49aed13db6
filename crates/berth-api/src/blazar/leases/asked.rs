//! The lease bodies as the operations take them.

use berth_app::leases::{CreateLease, LeaseChange, NewReservation, Recurrence, RequestKey, ReservationChange};

use crate::blazar::bodies;

/// The reservations a body asks for.
pub(in crate::blazar) fn reservations(list: Option<Vec<bodies::NewReservation>>) -> Vec<NewReservation> {
    let each = |r: bodies::NewReservation| NewReservation { resource_type: r.resource_type, params: r.params };
    list.unwrap_or_default().into_iter().map(each).collect()
}

/// `POST /v1/leases`, with the request's key and the configured bound on
/// occurrences.
pub(super) fn create(asked: bodies::NewLease, key: Option<RequestKey>, max_occurrences: usize) -> CreateLease {
    CreateLease {
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
    }
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
