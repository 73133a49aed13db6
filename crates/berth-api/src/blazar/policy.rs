//! The lease policy on the lease API path: built-in rules and the external
//! policy service (see `berth_plugins::policy`), asked before a lease is
//! created or changed, and told when one is deleted.

use berth_core::dates::DateSpec;
use berth_plugins::policy::LeaseValues;
use berth_store::commands::{LeaseDates, LeaseUpdate, NewLease, NewReservation};
use berth_store::queries::leases::Lease;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::ApiError;
use crate::AppState;

fn new_reservations(rs: &[NewReservation]) -> Vec<Value> {
    rs.iter().map(|r| LeaseValues::reservation(&r.resource_type, &r.params)).collect()
}

fn values_of(lease: &Lease) -> LeaseValues {
    let r = &lease.record;
    let reservations = r.reservations.iter().map(|x| (x.resource_type.as_str(), &x.params));
    LeaseValues::of_record(&r.name, &r.project_id, &r.user_id, (r.start, r.end), reservations)
}

/// Every lease `new` would make (one per occurrence when recurring).
pub(super) async fn check_create(state: &AppState, new: &NewLease, now: DateTime<Utc>) -> Result<(), ApiError> {
    let windows = match &new.dates {
        LeaseDates::One { start, end, .. } => vec![(start.resolve(now), end.resolve(now))],
        LeaseDates::Recurring(occ) => occ.clone(),
    };
    for (start, end) in windows {
        let values = LeaseValues {
            name: new.name.clone(),
            project_id: new.project_id.clone(),
            user_id: new.user_id.clone(),
            start,
            end,
            reservations: new_reservations(&new.reservations),
        };
        state.policy.check_create(&values).await?;
    }
    Ok(())
}

/// `current` changed by `update`.
pub(super) async fn check_update(
    state: &AppState,
    current: &Lease,
    update: &LeaseUpdate,
    now: DateTime<Utc>,
) -> Result<(), ApiError> {
    let before = values_of(current);
    let mut after = before.clone();
    if let Some(name) = &update.name {
        after.name = name.clone();
    }
    after.start = update.start.map(|s: DateSpec| s.resolve(now)).unwrap_or(before.start);
    after.end = update.end.map(|e: DateSpec| e.resolve(now)).unwrap_or(before.end);
    for u in &update.reservations {
        if let Some((i, r)) = current.record.reservations.iter().enumerate().find(|(_, r)| r.id == u.id) {
            after.reservations[i] = LeaseValues::reservation(&r.resource_type, &u.params);
        }
    }
    state.policy.check_update(&before, &after, now).await?;
    Ok(())
}

/// A lease deleted: the external service is told (a lease that ends on its
/// own is told by the manager once its end event is done).
pub(super) async fn on_end(state: &AppState, lease: &Lease) {
    state.policy.on_end(&values_of(lease)).await;
}
