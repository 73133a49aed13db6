//! Operators' controls over a lease (admin by default): `POST
//! /v1/leases/{id}/end` ends it now, its end running through the plugins
//! as any end; `POST /v1/leases/{id}/recover` takes it out of ERROR once
//! the world is fixed (`berth_core::lease_event::recovered` says where it
//! goes). Each answers the lease as `GET /v1/leases/{id}` shows it.

use axum::extract::{Path, State};
use axum::Json;
use berth_core::error::ErrorCode;
use serde_json::{json, Value};

use berth_app::leases::Control;

use super::super::{bodies, path_id};
use super::lease_json;
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

#[utoipa::path(
    post,
    path = "/v1/leases/{id}/end",
    tag = tags::LEASES,
    summary = "End a started lease now: its end (and before-end) fire through the plugins (admin)",
    responses(
        (status = 200, description = "The lease", body = bodies::OneLease),
        (status = 409, description = "Not started (berth.lease.not_started) or already ended (berth.lease.ended)"),
    ),
)]
pub(in crate::blazar) async fn end(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    control(state, ctx, &id, Control::End).await
}

#[utoipa::path(
    post,
    path = "/v1/leases/{id}/recover",
    tag = tags::LEASES,
    summary = "Take a lease out of ERROR: TERMINATED if its end ran, PENDING if its start has not, else ACTIVE (admin)",
    responses(
        (status = 200, description = "The lease", body = bodies::OneLease),
        (status = 409, description = "Not in ERROR (berth.lease.not_in_error) or an event running (berth.lease.event_in_progress)"),
    ),
)]
pub(in crate::blazar) async fn recover(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    control(state, ctx, &id, Control::Recover).await
}

/// One control over lease `id`; the lease as it is after.
async fn control(state: AppState, ctx: Context, id: &str, which: Control) -> Result<Json<Value>, ApiError> {
    let id = path_id(id, "lease", ErrorCode::LeaseNotFound)?;
    let lease = app(&state).leases().control(&caller(&state, &ctx), id, which).await?;
    Ok(Json(json!({ "lease": lease_json(&lease) })))
}
