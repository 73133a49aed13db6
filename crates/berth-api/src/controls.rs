//! Operators' controls over the manager: `POST /v1/events/{id}/retry`,
//! `/cancel` and `/fire` (one lease event), and `GET`/`PUT /v1/manager`
//! (pause or resume every manager of the deployment). Admin by default;
//! each control is recorded in the log with who did it (the entry's meta,
//! its `causation` the rule's name).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use berth_app::events::{Control, ManagerState};
use berth_app::Rule;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use serde_json::Value;
use uuid::Uuid;

use crate::auth::Context;
use crate::error::ApiError;
use crate::events::LeaseEventDetail;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(retry, cancel, fire, show, update))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/events/{id}/retry", post(retry))
        .route("/v1/events/{id}/cancel", post(cancel))
        .route("/v1/events/{id}/fire", post(fire))
        .route("/v1/manager", get(show).put(update))
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct OneEvent {
    event: LeaseEventDetail,
}

/// Retries, cancels or fires one lease event, as its rule allows.
async fn control(state: AppState, ctx: Context, id: String, control: Control) -> Result<Json<OneEvent>, ApiError> {
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::LeaseEventNotFound,
            format!("lease event {id} could not be found"),
        )
    };
    let id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let event = app(&state).events().control(&caller(&state, &ctx), id, control).await?;
    Ok(Json(OneEvent { event: LeaseEventDetail::of(&event) }))
}

#[utoipa::path(
    post,
    path = "/v1/events/{id}/retry",
    tag = tags::ADDITIONS,
    summary = "Run a lease event in ERROR again: UNDONE, attempts reset, due now (admin)",
    responses(
        (status = 200, description = "The lease event", body = OneEvent),
        (status = 409, description = "Not in ERROR: berth.lease_event.not_in_error"),
    ),
)]
async fn retry(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<OneEvent>, ApiError> {
    control(state, ctx, id, Control::Retry).await
}

#[utoipa::path(
    post,
    path = "/v1/events/{id}/cancel",
    tag = tags::ADDITIONS,
    summary = "Cancel a waiting lease event: CANCELLED, it never fires; the lease goes on (admin)",
    responses(
        (status = 200, description = "The lease event", body = OneEvent),
        (status = 409, description = "Not UNDONE: berth.lease_event.not_pending"),
    ),
)]
async fn cancel(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<OneEvent>, ApiError> {
    control(state, ctx, id, Control::Cancel).await
}

#[utoipa::path(
    post,
    path = "/v1/events/{id}/fire",
    tag = tags::ADDITIONS,
    summary = "Make a waiting lease event due now (admin)",
    responses(
        (status = 200, description = "The lease event", body = OneEvent),
        (status = 409, description = "Not UNDONE: berth.lease_event.not_pending"),
    ),
)]
async fn fire(State(state): State<AppState>, ctx: Context, Path(id): Path<String>) -> Result<Json<OneEvent>, ApiError> {
    control(state, ctx, id, Control::Fire).await
}

/// The manager as `GET /v1/manager` shows it.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Manager {
    paused: bool,
    changed_at: Option<String>,
    changed_by: Option<ChangedBy>,
    /// Replicas holding claims now or seen claiming in the last hour.
    replicas: Vec<Replica>,
    counts: Counts,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct ChangedBy {
    user_id: String,
    project_id: String,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Replica {
    id: String,
    in_progress: i64,
    last_seen_at: String,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Counts {
    /// UNDONE events whose time has come (they wait while paused).
    due: i64,
    in_progress: i64,
    error: i64,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct OneManager {
    manager: Manager,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
struct ManagerChange {
    paused: bool,
}

fn manager_json(m: &ManagerState) -> Json<OneManager> {
    Json(OneManager {
        manager: Manager {
            paused: m.paused,
            changed_at: m.changed_at.map(format_date),
            changed_by: m.changed_by.as_ref().map(|(u, p)| ChangedBy { user_id: u.clone(), project_id: p.clone() }),
            replicas: m
                .replicas
                .iter()
                .map(|r| Replica {
                    id: r.id.clone(),
                    in_progress: r.in_progress,
                    last_seen_at: format_date(r.last_seen_at),
                })
                .collect(),
            counts: Counts { due: m.due, in_progress: m.in_progress, error: m.error },
        },
    })
}

#[utoipa::path(
    get,
    path = "/v1/manager",
    tag = tags::ADDITIONS,
    summary = "The manager: paused or not and who said so, replicas, events due, running and failed (admin)",
    responses(
        (status = 200, description = "The manager", body = OneManager),
    ),
)]
async fn show(State(state): State<AppState>, ctx: Context) -> Result<Json<OneManager>, ApiError> {
    Ok(manager_json(&app(&state).events().manager(&caller(&state, &ctx)).await?))
}

/// `{"paused": true|false}` (or wrapped in `manager`); nothing else.
fn paused_of(body: &Bytes) -> Result<bool, ApiError> {
    let bad = |m: &str| ApiError::bad_request(ErrorCode::Invalid, m.to_string());
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("the body must be JSON: {\"paused\": true|false}"))?;
    let obj = match v.get("manager") {
        Some(inner) if v.as_object().is_some_and(|o| o.len() == 1) => inner,
        _ => &v,
    };
    let Some(obj) = obj.as_object() else {
        return Err(bad("the body must be a JSON object: {\"paused\": true|false}"));
    };
    if let Some(k) = obj.keys().find(|k| *k != "paused") {
        return Err(bad(&format!("unknown field {k:?}: only paused may change")));
    }
    let change: ManagerChange =
        serde_json::from_value(Value::Object(obj.clone())).map_err(|_| bad("paused must be true or false"))?;
    Ok(change.paused)
}

#[utoipa::path(
    put,
    path = "/v1/manager",
    tag = tags::ADDITIONS,
    summary = "Pause or resume every manager: paused, none claims another lease event (admin)",
    request_body = ManagerChange,
    responses(
        (status = 200, description = "The manager", body = OneManager),
    ),
)]
async fn update(State(state): State<AppState>, ctx: Context, body: Bytes) -> Result<Json<OneManager>, ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = caller.may(Rule::ManagerUpdate)?;
    let paused = paused_of(&body)?;
    Ok(manager_json(&app.events().pause(&caller, may, paused).await?))
}
