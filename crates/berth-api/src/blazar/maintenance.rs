//! `/v1/maintenance`: hosts an admin reserves for a window even where
//! leases hold them (Slurm's MAINT). The answer lists the leases hit; they
//! are flagged, and with `heal` moved to other hosts at once.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use berth_app::maintenance::{MaintenanceWindow, Schedule};
use berth_app::Rule;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use serde_json::{json, Value};

use super::bodies;
use super::{path_id, read};
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

fn window_json(w: &MaintenanceWindow) -> Value {
    json!({
        "id": w.id,
        "hosts": w.hosts,
        "start_date": format_date(w.start),
        "end_date": format_date(w.end),
        "heal": w.heal,
        "reason": w.reason,
        "created_at": format_date(w.created_at),
    })
}

#[utoipa::path(
    post,
    path = "/v1/maintenance",
    tag = tags::ADDITIONS,
    summary = "Reserve hosts for maintenance over a window (admin); the leases hit are flagged, and moved with heal",
    request_body = bodies::NewMaintenance,
    responses(
        (status = 201, description = "The window, and what it did to each reservation it hit", body = bodies::MaintenanceMade),
    ),
)]
pub(super) async fn create(
    State(state): State<AppState>,
    ctx: Context,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = caller.may(Rule::MaintenanceCreate)?;
    let asked: bodies::NewMaintenance = read::read(&body)?;
    let asked = Schedule {
        hosts: asked.hosts,
        start_date: asked.start_date,
        end_date: asked.end_date,
        heal: asked.heal,
        reason: asked.reason,
    };
    let made = app.maintenance().schedule(&caller, may, asked).await?;
    let leases: Vec<Value> = made.hit.iter().map(crate::heal::outcome_json).collect();
    let window = made.window.as_ref().map(window_json).unwrap_or_else(|| json!({"id": made.id}));
    Ok((StatusCode::CREATED, Json(json!({"maintenance": window, "leases": leases}))))
}

#[utoipa::path(
    get,
    path = "/v1/maintenance",
    tag = tags::ADDITIONS,
    summary = "Maintenance windows not over yet (admin)",
    responses(
        (status = 200, description = "The windows, by start", body = bodies::MaintenanceWindows),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context) -> Result<Json<Value>, ApiError> {
    let all = app(&state).maintenance().list(&caller(&state, &ctx)).await?;
    Ok(Json(json!({"maintenance": all.iter().map(window_json).collect::<Vec<_>>()})))
}

#[utoipa::path(
    delete,
    path = "/v1/maintenance/{id}",
    tag = tags::ADDITIONS,
    summary = "Cancel a maintenance window (admin); what it flagged heals at the manager's next sweep",
    responses(
        (status = 204, description = "Cancelled"),
    ),
)]
pub(super) async fn delete(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = caller.may(Rule::MaintenanceDelete)?;
    let id = path_id(&id, "maintenance window", ErrorCode::MaintenanceNotFound)?;
    app.maintenance().cancel(&caller, may, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
