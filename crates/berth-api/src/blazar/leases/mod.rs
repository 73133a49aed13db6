//! `/v1/leases`: create, list, show, update, delete. Reading the body is
//! [`parse`], recurrence and the dry run [`recurrence`], the check of the
//! instances a reservation names [`instances`], and the answer [`shape`].

pub(super) mod control;
mod instances;
mod parse;
mod recurrence;
mod shape;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_core::lease::LeaseStatus;
use berth_store::commands::{Keyed, LeaseDates, LeaseUpdate, NewLease};
use berth_store::queries::leases::{Lease, LeaseFilter, LeaseKey};
use serde_json::{json, Value};
use uuid::Uuid;

use super::bodies;
use super::read::{self, Body as _};
use super::{idempotency, meta, path_id};
use crate::access::{Action, Target};
use crate::auth::Context;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::paging::{Ask, Listing};
use crate::tags;
use crate::whole::Items;
use crate::AppState;
pub(super) use parse::reservations;
use parse::{date_field, fixed_date, reservation_changes, shifted};
use recurrence::dry_run_answer;
use recurrence::occurrences;
use shape::lease_json;

/// The project whose leases `ctx` sees (`None`: every project's).
fn scope<'c>(state: &AppState, ctx: &'c Context) -> Option<&'c str> {
    state.rules.visible_project(ctx, Action::LeasesGetAllProjects)
}

fn lease_target(lease: &Lease) -> Target<'_> {
    Target::owned(&lease.record.project_id, &lease.record.user_id)
}

/// Creates a lease (one per occurrence when recurring). With
/// `"dry_run": true` it writes nothing and answers the occurrences, each
/// with whether it fits.
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
    state.rules.authorize(&ctx, Action::LeasesCreate, &Target::own(&ctx))?;
    let obj = read::object(&body, bodies::NewLease::WRAPPERS)?;
    let key = idempotency::request_key(&headers, &ctx, "POST /v1/leases", &obj)?;
    let asked: bodies::NewLease = read::typed(&obj)?;
    let dry_run = asked.dry_run.unwrap_or(false);
    let start = date_field("start_date", asked.start_date.as_deref())?.unwrap_or(DateSpec::Now);
    let reservations = reservations(&state, asked.reservations.unwrap_or_default()).await?;
    // The database's time, for what must be resolved before the command
    // (occurrences, the policy service's view); the command resolves
    // `start_date: now` and checks "in the past" again in its transaction.
    let now = state.store.now().await?;
    let dates = match &asked.recurrence {
        Some(rec) => LeaseDates::Recurring(occurrences(rec, start.resolve(now), config.max_occurrences)?),
        None => {
            let Some(end) = date_field("end_date", asked.end_date.as_deref())? else {
                return Err(ApiError::bad_request(ErrorCode::InvalidDate, "end_date is required"));
            };
            LeaseDates::One {
                start,
                end,
                before_end: fixed_date("before_end_date", asked.before_end_date.as_deref(), now)?,
            }
        }
    };
    instances::check(&state, &ctx, &reservations).await?;
    let new = NewLease {
        name: asked.name,
        project_id: ctx.project_id.clone(),
        user_id: ctx.user_id.clone(),
        dates,
        reservations,
    };
    super::policy::check_create(&state, &new, now).await?;
    if dry_run {
        return Ok((StatusCode::OK, Json(dry_run_answer(&state, &new, now).await?)).into_response());
    }
    let (made, replayed) = match key {
        None => (state.store.create_lease(&meta(&ctx), new).await?, false),
        Some(key) => match state.store.create_lease_keyed(&meta(&ctx), new, &key).await? {
            Keyed::Made(made) => (made, false),
            Keyed::Earlier(made) if made.is_empty() => {
                return Err(ApiError::from(berth_core::Error::not_found(
                    ErrorCode::LeaseNotFound,
                    format!("the leases made with Idempotency-Key {} have since been deleted", key.key),
                )))
            }
            Keyed::Earlier(made) => (made, true),
        },
    };
    let mut out = lease_json(&made[0]);
    if made.len() > 1 {
        let ids: Vec<_> = made.iter().map(|l| l.record.id).collect();
        out["recurrence"] = json!({"id": made[0].record.recurrence_id, "leases": ids});
    }
    Ok(idempotency::created(json!({ "lease": out }), replayed))
}

#[utoipa::path(
    get,
    path = "/v1/leases",
    tag = tags::LEASES,
    summary = "List leases (status, project_id for admins, limit, marker)",
    params(
        ("status" = Option<String>, Query, description = "Only leases in this status"),
        ("project_id" = Option<String>, Query, description = "Only this project's (admins)"),
        crate::paging::PageParams,
    ),
    responses(
        (status = 200, description = "The leases in creation order: all of them, or a page when `limit` or `marker` is given", body = bodies::Leases),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context, listing: Listing) -> Result<Response, ApiError> {
    let q = &listing.query;
    state.rules.authorize(&ctx, Action::LeasesList, &Target::own(&ctx))?;
    let bad = |m: String| ApiError::bad_request(ErrorCode::InvalidLease, m);
    let project_id = match (q.get("project_id"), scope(&state, &ctx)) {
        (Some(p), None) => Some(p.clone()),
        (None, None) => None,
        (Some(p), Some(own)) if p != own => return Err(ApiError::forbidden()),
        (_, Some(own)) => Some(own.to_string()),
    };
    let status = match q.get("status") {
        Some(s) => Some(LeaseStatus::parse(s).ok_or_else(|| bad(format!("status {s:?} is not a lease status")))?),
        None => None,
    };
    match listing.ask()? {
        Ask::Page(page) => {
            let after = match &page.marker {
                Some(m) => {
                    let m = Uuid::parse_str(m).map_err(|_| bad(format!("marker {m:?} is not a lease id")))?;
                    Some(state.store.lease_key(m, project_id.as_deref()).await?)
                }
                None => None,
            };
            let filter = LeaseFilter { project_id, status, after, limit: Some(page.sql_limit()) };
            let leases = state.store.leases(&filter).await?;
            let shown = leases.iter().map(lease_json).collect();
            Ok(Json(page.answer("leases", "/v1/leases", q, shown, "id")).into_response())
        }
        Ask::Whole(whole) => {
            // The visibility is in the filter, decided above, before any lease is read.
            let filter = LeaseFilter { project_id, status, after: None, limit: Some(whole.sql_limit()) };
            let first = state.store.leases(&filter).await?;
            let store = state.store.clone();
            let items = Items { render: Box::new(lease_json), key: Lease::key };
            Ok(whole.answer("leases", first, items, move |after: LeaseKey| {
                let (store, filter) = (store.clone(), LeaseFilter { after: Some(after), ..filter.clone() });
                async move { store.leases(&filter).await }
            }))
        }
    }
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
    let lease = state.store.lease(id, scope(&state, &ctx)).await?;
    state.rules.authorize(&ctx, Action::LeasesGet, &lease_target(&lease))?;
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
    let current = state.store.lease(id, scope(&state, &ctx)).await?;
    state.rules.authorize(&ctx, Action::LeasesUpdate, &lease_target(&current))?;
    let asked: bodies::LeaseChange = read::typed(&obj)?;
    let r = &current.record;
    let mut end = date_field("end_date", asked.end_date.as_deref())?;
    let later = [("prolong_for", &asked.prolong_for), ("reduce_by", &asked.reduce_by)];
    if let Some(e) = shifted("end_date", later, r.end)? {
        if end.is_some() {
            return Err(ApiError::bad_request(ErrorCode::InvalidLease, "end_date and a relative move of it conflict"));
        }
        end = Some(e);
    }
    let mut start = date_field("start_date", asked.start_date.as_deref())?;
    let moved = [("defer_by", &asked.defer_by), ("advance_by", &asked.advance_by)];
    if let Some(s) = shifted("start_date", moved, r.start)? {
        if start.is_some() {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidLease,
                "start_date and a relative move of it conflict",
            ));
        }
        start = Some(s);
    }
    let changes = reservation_changes(&state, &ctx, &current, asked.reservations.unwrap_or_default()).await?;
    let now = state.store.now().await?;
    let update = LeaseUpdate {
        name: asked.name,
        start,
        end,
        before_end: fixed_date("before_end_date", asked.before_end_date.as_deref(), now)?,
        reservations: changes,
    };
    if update.name.is_none()
        && update.start.is_none()
        && update.end.is_none()
        && update.before_end.is_none()
        && update.reservations.is_empty()
    {
        return Err(ApiError::bad_request(ErrorCode::InvalidLease, "nothing to update"));
    }
    if matches!(update.end, Some(DateSpec::At(t)) if t > r.end) {
        state.rules.authorize(&ctx, Action::LeasesExtend, &lease_target(&current))?;
    }
    super::policy::check_update(&state, &current, &update, now).await?;
    state.store.update_lease(&meta(&ctx), id, scope(&state, &ctx), update).await?;
    let lease = state.store.lease(id, None).await?;
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
    let lease = state.store.lease(id, scope(&state, &ctx)).await?;
    state.rules.authorize(&ctx, Action::LeasesDelete, &lease_target(&lease))?;
    state.store.delete_lease(&meta(&ctx), id, scope(&state, &ctx)).await?;
    super::policy::on_end(&state, &lease).await;
    Ok(StatusCode::NO_CONTENT)
}
