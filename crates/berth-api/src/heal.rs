//! What the reservations a heal looks at need (`berth_app::App::heal_demands`
//! asks their plugins), for Placement's routes that make hosts unusable or
//! usable again, and how a heal's outcome is shown.

use berth_store::commands::{Demands, HealOutcome};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::error::ApiError;
use crate::AppState;

/// The demands of every reservation a heal over `down` would look at.
pub(crate) async fn demands(state: &AppState, down: &[Uuid]) -> Result<Demands, ApiError> {
    Ok(crate::gate::app(state).heal_demands(down).await?)
}

/// What a heal did to one reservation, as answers show it.
pub(crate) fn outcome_json(o: &HealOutcome) -> Value {
    json!({"lease_id": o.lease, "reservation_id": o.reservation, "moved": o.moved, "missing": o.missing})
}
