//! The lease policy, in one place: beside quotas (the store's), the
//! built-in rules as configured (their arithmetic is `berth_core::policy`)
//! and the optional external policy service ([`service`]: the `[policy]`
//! configuration and the service's client), asked here before a lease is
//! created or changed, and told when one ends, whether a caller deleted it
//! (the API) or its end event ran (the manager).

use berth_core::dates::DateSpec;
use berth_core::lease::LeaseRecord;
mod service;

use berth_store::commands::{LeaseDates, LeaseUpdate, NewLease, NewReservation};
use berth_store::queries::leases::Lease;
use chrono::{DateTime, Utc};
use serde_json::Value;
pub use service::{ExternalPolicyConfig, LeaseValues, Policy, PolicyConfig, GENERIC_DENIAL};

fn new_reservations(rs: &[NewReservation]) -> Vec<Value> {
    rs.iter().map(|r| LeaseValues::reservation(&r.resource_type, &r.params)).collect()
}

/// The lease as the policy service is told of it.
pub fn values_of(r: &LeaseRecord) -> LeaseValues {
    let reservations = r.reservations.iter().map(|x| (x.resource_type.as_str(), &x.params));
    LeaseValues::of_record(&r.name, &r.project_id, &r.user_id, (r.start, r.end), reservations)
}

/// Every lease `new` would make (one per occurrence when recurring).
pub(crate) async fn check_create(policy: &Policy, new: &NewLease, now: DateTime<Utc>) -> Result<(), berth_core::Error> {
    let windows = match &new.dates {
        LeaseDates::One { start, end, .. } => vec![(start.resolve(now), end.resolve(now))],
        LeaseDates::Recurring { occurrences: occ, .. } => occ.clone(),
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
        policy.check_create(&values).await?;
    }
    Ok(())
}

/// `current` changed by `update`.
pub(crate) async fn check_update(
    policy: &Policy,
    current: &Lease,
    update: &LeaseUpdate,
    now: DateTime<Utc>,
) -> Result<(), berth_core::Error> {
    let before = values_of(&current.record);
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
    policy.check_update(&before, &after, now).await
}

/// A lease ended: the external service is told. A caller's deletion tells
/// it at once; a lease that ends on its own is told by the manager once
/// its end event is recorded done, with [`values_of`] taken when it ran.
pub async fn on_end(policy: &Policy, lease: &LeaseValues) {
    policy.on_end(lease).await;
}
