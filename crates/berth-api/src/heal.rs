//! What the reservations a heal looks at need, asked of their plugins
//! before the command that heals (a plugin may be outside, over its
//! driver), for the routes that make hosts unusable or usable again.

use berth_store::commands::{Demands, HealOutcome};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::error::ApiError;
use crate::AppState;

/// The demands of every reservation a heal over `down` would look at.
pub(crate) async fn demands(state: &AppState, down: &[Uuid]) -> Result<Demands, ApiError> {
    let mut out = Demands::new();
    for r in state.store.reservations_to_heal(down).await? {
        if let Some(d) = state.plugins.demand_of(&r.resource_type, &r.params).await {
            out.insert(r.reservation, d);
        }
    }
    Ok(out)
}

/// What a heal did to one reservation, as answers show it.
pub(crate) fn outcome_json(o: &HealOutcome) -> Value {
    json!({"lease_id": o.lease, "reservation_id": o.reservation, "moved": o.moved, "missing": o.missing})
}
