//! `/v1/loans`: capacity lent to preemptible consumers (docs/lending.md),
//! for the operator: who borrows what on which host, until when, and how
//! each reclaim went.

use axum::extract::State;
use axum::Json;
use berth_app::loans::Loan;
use berth_core::dates::format_date;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

/// The loans listed.
#[derive(Serialize, ToSchema)]
pub(super) struct Loans {
    /// Each with `consumer_id`, `project_id`, `user_id`, `lent_at`,
    /// `reclaim_at` (null: no owner needs it so far), `reclaim` (PENDING,
    /// CLAIMED, DONE or ERROR) and `allocations` by provider.
    loans: Vec<Value>,
}

#[utoipa::path(
    get,
    path = "/v1/loans",
    tag = tags::ADDITIONS,
    summary = "Capacity lent to preemptible consumers and its reclaims (admin): not reclaimed yet, or within the hour",
    responses(
        (status = 200, description = "At most 1,000, soonest due first", body = Loans),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context) -> Result<Json<Value>, ApiError> {
    let all = app(&state).loans().list(&caller(&state, &ctx)).await?;
    Ok(Json(json!({"loans": all.iter().map(loan_json).collect::<Vec<_>>()})))
}

fn loan_json(l: &Loan) -> Value {
    let allocations: Vec<Value> = l
        .holds
        .iter()
        .map(|((uuid, name), resources)| {
            json!({"resource_provider": {"uuid": uuid, "name": name}, "resources": resources})
        })
        .collect();
    json!({
        "consumer_id": l.consumer,
        "project_id": l.project_id,
        "user_id": l.user_id,
        "lent_at": format_date(l.lent_at),
        "reclaim_at": l.until.map(format_date),
        "reclaim": l.reclaim,
        "allocations": allocations,
    })
}
