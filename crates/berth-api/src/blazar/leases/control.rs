//! Operators' controls over a lease (admin by default): `POST
//! /v1/leases/{id}/end` ends it now, its end running through the plugins
//! as any end; `POST /v1/leases/{id}/recover` takes it out of ERROR once
//! the world is fixed (`berth_core::lease_event::recovered` says where it
//! goes). Each answers the lease as `GET /v1/leases/{id}` shows it.

use axum::extract::{Path, State};
use axum::Json;
use berth_core::error::ErrorCode;
use serde_json::{json, Value};

use super::super::{bodies, path_id};
use super::{lease_json, lease_target, scope};
use crate::access::Action;
use crate::auth::Context;
use crate::controls::control_meta;
use crate::error::ApiError;
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
    control(state, ctx, &id, LeaseControl::End).await
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
    control(state, ctx, &id, LeaseControl::Recover).await
}

/// The controls over a whole lease.
#[derive(Clone, Copy)]
enum LeaseControl {
    End,
    Recover,
}

/// One control over lease `id`: not found unless the caller may see the
/// lease, then the control's rule on the lease, then the command; the lease
/// as it is after.
async fn control(state: AppState, ctx: Context, id: &str, which: LeaseControl) -> Result<Json<Value>, ApiError> {
    let action = match which {
        LeaseControl::End => Action::LeasesEnd,
        LeaseControl::Recover => Action::LeasesRecover,
    };
    let id = path_id(id, "lease", ErrorCode::LeaseNotFound)?;
    let scope = scope(&state, &ctx);
    let lease = state.store.lease(id, scope).await?;
    state.rules.authorize(&ctx, action, &lease_target(&lease))?;
    let meta = control_meta(&ctx, action);
    match which {
        LeaseControl::End => state.store.end_lease(&meta, id, scope).await?,
        LeaseControl::Recover => state.store.recover_lease(&meta, id, scope).await?,
    }
    Ok(Json(json!({ "lease": lease_json(&state.store.lease(id, None).await?) })))
}
