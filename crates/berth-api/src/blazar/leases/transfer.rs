//! Splitting a lease and handing it to another project (`docs/transfers.md`):
//! `POST /v1/leases/{id}/split`, `POST /v1/leases/{id}/transfer` (at once
//! for an admin, else an offer), `POST /v1/leases/{id}/transfer/accept` by
//! the target project, `DELETE /v1/leases/{id}/transfer` to withdraw it.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_app::leases::{Consent, SplitRequest, TransferRequest, Transferred};
use berth_core::error::ErrorCode;
use berth_core::lease::split::{SplitPart, Take};
use serde_json::{json, Value};

use super::super::{bodies, path_id, read};
use super::lease_json;
use super::shape::transfer_json;
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

fn split_request(asked: bodies::SplitLease) -> Result<SplitRequest, ApiError> {
    asked.check()?;
    let parts = asked
        .reservations
        .into_iter()
        .map(|r| SplitPart {
            reservation: r.id,
            take: match (r.hosts, r.count) {
                (Some(hosts), _) => Take::Hosts(hosts),
                (None, count) => Take::Count(count.unwrap_or(0)),
            },
        })
        .collect();
    Ok(SplitRequest { name: asked.name, parts, project_id: asked.project_id })
}

#[utoipa::path(
    post,
    path = "/v1/leases/{id}/split",
    tag = tags::LEASES,
    summary = "Move some hosts or slots of a lease not started into a new lease with the same window",
    request_body = bodies::SplitLease,
    responses(
        (status = 201, description = "The new lease", body = bodies::OneLease),
        (status = 409, description = "Started (berth.lease.started), or it would leave a reservation empty or names what it does not hold (berth.lease.split_refused)"),
    ),
)]
pub(in crate::blazar) async fn split(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let asked = split_request(read::read(&body)?)?;
    let made = app(&state).leases().split(&caller(&state, &ctx), id, asked).await?;
    Ok((StatusCode::CREATED, Json(json!({ "lease": lease_json(&made) }))))
}

#[utoipa::path(
    post,
    path = "/v1/leases/{id}/transfer",
    tag = tags::LEASES,
    summary = "Hand a lease not started to another project: at once (admin), else offered until the target accepts",
    request_body = bodies::TransferLease,
    responses(
        (status = 200, description = "Moved: the lease", body = bodies::OneLease),
        (status = 202, description = "Offered", body = bodies::TransferOffered),
        (status = 403, description = "No consent (berth.transfer.no_consent), or the target's quota (berth.quota.exceeded)"),
    ),
)]
pub(in crate::blazar) async fn transfer(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let asked: bodies::TransferLease = read::read(&body)?;
    let consent = asked.consent.map(|c| match c {
        bodies::TransferConsent::Immediate => Consent::Immediate,
        bodies::TransferConsent::Offer => Consent::Offer,
    });
    let asked = TransferRequest { project_id: asked.project_id, user_id: asked.user_id, consent };
    Ok(transferred(app(&state).leases().transfer(&caller(&state, &ctx), id, asked).await?))
}

fn transferred(done: Transferred) -> Response {
    match done {
        Transferred::Moved(l) => Json(json!({ "lease": lease_json(&l) })).into_response(),
        Transferred::Offered(l) => {
            let transfer = l.transfer.as_ref().map(transfer_json);
            (StatusCode::ACCEPTED, Json(json!({ "lease_id": l.record.id, "transfer": transfer }))).into_response()
        }
    }
}

#[utoipa::path(
    post,
    path = "/v1/leases/{id}/transfer/accept",
    tag = tags::LEASES,
    summary = "Accept a lease offered to one's project: it becomes the project's and the caller's",
    responses(
        (status = 200, description = "The lease, now the caller's", body = bodies::OneLease),
        (status = 403, description = "Not offered to the caller's project (berth.transfer.no_consent), or its quota (berth.quota.exceeded)"),
    ),
)]
pub(in crate::blazar) async fn accept(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let lease = app(&state).leases().accept_transfer(&caller(&state, &ctx), id).await?;
    Ok(Json(json!({ "lease": lease_json(&lease) })))
}

#[utoipa::path(
    delete,
    path = "/v1/leases/{id}/transfer",
    tag = tags::LEASES,
    summary = "Withdraw the offer of a lease to another project",
    responses(
        (status = 204, description = "Withdrawn"),
        (status = 404, description = "No such lease, or no offer of it (berth.transfer.not_found)"),
    ),
)]
pub(in crate::blazar) async fn withdraw(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    app(&state).leases().withdraw_transfer(&caller(&state, &ctx), id).await?;
    Ok(StatusCode::NO_CONTENT)
}
