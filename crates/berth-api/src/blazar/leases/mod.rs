//! `/v1/leases`: create, list, show, update, delete. Each handler reads
//! the request ([`asked`] makes the operation's request of the body), calls
//! one of `berth_app`'s lease operations, and renders its result
//! ([`shape`]).

mod asked;
pub(super) mod control;
mod shape;
pub(super) mod share;
pub(super) mod transfer;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use berth_app::leases::{Lease, LeaseFilter, LeaseKey, LeaseStatus};
use berth_core::error::ErrorCode;
use serde_json::{json, Value};
use uuid::Uuid;

use super::bodies;
use super::read::{self, Body as _};
use super::{idempotency, path_id};
use crate::auth::Context;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::paging::{Ask, Listing};
use crate::tags;
use crate::whole::Items;
use crate::AppState;
pub(super) use asked::reservations;
use shape::lease_json;

/// Creates a lease (one per occurrence when recurring). With
/// `"dry_run": true` it writes nothing and answers the occurrences, each
/// with whether it fits. With `"offer": id` (and a `name`, nothing else)
/// it books that offer (`POST /v1/offers`).
#[utoipa::path(
    post,
    path = "/v1/leases",
    tag = tags::LEASES,
    summary = "Create a lease: every reservation fits at every instant, or none is taken",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Up to 255 printable ASCII characters: the same \
          key with the same body within 24 h answers the leases first made (with `Idempotent-Replayed: true`) \
          and creates nothing; with another body it is a 409"),
    ),
    request_body = bodies::NewLease,
    responses(
        (status = 201, description = "The lease (the first, when recurring)", body = bodies::OneLease),
        (status = 200, description = "A dry run: the occurrences", body = bodies::DryRun),
    ),
)]
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(config): Extension<Arc<ApiConfig>>,
    ctx: Context,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.leases().may_create(&caller)?;
    let obj = read::object(&body, bodies::NewLease::WRAPPERS)?;
    let key = idempotency::request_key(&headers, &ctx, "POST /v1/leases", &obj)?;
    let asked = asked::create(&obj, read::typed(&obj)?, key, config.max_occurrences)?;
    Ok(shape::created(app.leases().create(&caller, may, asked).await?))
}

#[utoipa::path(
    get,
    path = "/v1/leases",
    tag = tags::LEASES,
    summary = "List leases (status, project_id for admins, limit, marker)",
    params(
        ("status" = Option<String>, Query, description = "Only leases in this status"),
        ("project_id" = Option<String>, Query, description = "Only this project's (admins)"),
        crate::paging::Page,
    ),
    responses(
        (status = 200, description = "The leases in creation order: all of them, or a page when `limit` or `marker` is given", body = bodies::Leases),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context, listing: Listing) -> Result<Response, ApiError> {
    let q = &listing.query;
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let project_id = app.leases().list_scope(&caller, q.get("project_id").map(String::as_str))?;
    let status = match q.get("status") {
        Some(s) => Some(LeaseStatus::parse(s).ok_or_else(|| bad(format!("status {s:?} is not a lease status")))?),
        None => None,
    };
    match listing.ask()? {
        Ask::Page(page) => {
            let after = match &page.marker {
                Some(m) => Some(app.leases().marker(marker(m)?, project_id.as_deref()).await?),
                None => None,
            };
            let filter = LeaseFilter { project_id, status, after, limit: Some(page.sql_limit()) };
            let shown = app.leases().page(&filter).await?.iter().map(lease_json).collect();
            Ok(Json(page.answer("leases", "/v1/leases", q, shown, "id")).into_response())
        }
        Ask::Whole(whole) => {
            // The visibility is in the filter, decided above, before any lease is read.
            let filter = LeaseFilter { project_id, status, after: None, limit: Some(whole.sql_limit()) };
            let first = app.leases().page(&filter).await?;
            let items = Items { render: Box::new(lease_json), key: Lease::key };
            Ok(whole.answer("leases", first, items, move |after: LeaseKey| {
                let (app, filter) = (app.clone(), LeaseFilter { after: Some(after), ..filter.clone() });
                async move { app.leases().page(&filter).await }
            }))
        }
    }
}

fn bad(m: String) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, m)
}

fn marker(m: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(m).map_err(|_| bad(format!("marker {m:?} is not a lease id")))
}

#[utoipa::path(
    get,
    path = "/v1/leases/{id}",
    tag = tags::LEASES,
    summary = "Show a lease with its reservations and events",
    responses(
        (status = 200, description = "The lease", body = bodies::OneLease),
    ),
)]
pub(super) async fn show(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let lease = app(&state).leases().show(&caller(&state, &ctx), id).await?;
    Ok(Json(json!({ "lease": lease_json(&lease) })))
}

#[utoipa::path(
    put,
    path = "/v1/leases/{id}",
    tag = tags::LEASES,
    summary = "Rename, move, extend, shorten or change a lease, re-checked as a whole",
    request_body = bodies::LeaseChange,
    responses(
        (status = 200, description = "The lease", body = bodies::OneLease),
    ),
)]
pub(super) async fn update(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let obj = read::object(&body, bodies::LeaseChange::WRAPPERS)?;
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let current = app.leases().changing(&caller, id).await?;
    let asked = asked::change(read::typed(&obj)?);
    let lease = app.leases().update(&caller, current, asked).await?;
    Ok(Json(json!({ "lease": lease_json(&lease) })))
}

#[utoipa::path(
    delete,
    path = "/v1/leases/{id}",
    tag = tags::LEASES,
    summary = "Delete a lease; what it held is free at once",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub(super) async fn delete(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    app(&state).leases().delete(&caller(&state, &ctx), id).await?;
    Ok(StatusCode::NO_CONTENT)
}
