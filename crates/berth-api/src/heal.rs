//! How a heal's outcome is shown (what the reservations a heal looks at
//! need, `berth_app::App::heal_demands` asks their plugins).

use berth_app::hosts::HealOutcome;
use serde_json::{json, Value};

/// What a heal did to one reservation, as answers show it.
pub(crate) fn outcome_json(o: &HealOutcome) -> Value {
    json!({"lease_id": o.lease, "reservation_id": o.reservation, "moved": o.moved, "missing": o.missing})
}
