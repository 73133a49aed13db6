//! `/v1/maintenance`: hosts an admin reserves for a window even where
//! leases hold them (Slurm's MAINT). The answer lists the leases hit; they
//! are flagged, and with `heal` moved to other hosts at once.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use berth_store::commands::{Demands, MaintenanceWindow, NewMaintenance};
use serde_json::{json, Value};

use super::bodies;
use super::{meta, path_id, read};
use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::MaintenanceInvalid, m)
}

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

/// The body as a window to schedule; `now` the database's time.
fn parse(asked: bodies::NewMaintenance, now: chrono::DateTime<chrono::Utc>) -> Result<NewMaintenance, ApiError> {
    if asked.hosts.is_empty() {
        return Err(bad("hosts (a list of host ids) is required"));
    }
    let date = |key: &str, s: &str| -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
        Ok(berth_core::dates::parse_date(key, s)?.resolve(now))
    };
    Ok(NewMaintenance {
        hosts: asked.hosts,
        start: date("start_date", &asked.start_date)?,
        end: date("end_date", &asked.end_date)?,
        heal: asked.heal.unwrap_or(false),
        reason: asked.reason,
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
    state.rules.authorize(&ctx, Action::MaintenanceCreate, &Target::own(&ctx))?;
    let asked: bodies::NewMaintenance = read::read(&body)?;
    let new = parse(asked, state.store.now().await?)?;
    let mut demands = Demands::new();
    for r in state.store.reservations_hit(&new).await? {
        if let Some(d) = state.plugins.demand_of(&r.resource_type, &r.params).await {
            demands.insert(r.reservation, d);
        }
    }
    let (id, hit) = state.store.schedule_maintenance(&meta(&ctx), &new, &demands).await?;
    let made = state.store.maintenance_windows().await?.into_iter().find(|w| w.id == id);
    let leases: Vec<Value> = hit.iter().map(crate::heal::outcome_json).collect();
    let window = made.as_ref().map(window_json).unwrap_or_else(|| json!({"id": id}));
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
    state.rules.authorize(&ctx, Action::MaintenanceList, &Target::own(&ctx))?;
    let all = state.store.maintenance_windows().await?;
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
    state.rules.authorize(&ctx, Action::MaintenanceDelete, &Target::own(&ctx))?;
    let id = path_id(&id, "maintenance window", ErrorCode::MaintenanceNotFound)?;
    state.store.cancel_maintenance(&meta(&ctx), id).await?;
    Ok(StatusCode::NO_CONTENT)
}
