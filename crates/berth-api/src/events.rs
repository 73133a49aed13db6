//! Lease events as operators watch them: `GET /v1/events` and
//! `GET /v1/leases/{id}/events`, each event with its due time, status,
//! attempts, last error and claimer. Members see their project's only.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use berth_app::events::{LeaseEventFilter, LeaseEventRow};
use berth_app::{App, Caller, Rule};
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use berth_core::lease::{LeaseEventStatus, LeaseEventType};
use uuid::Uuid;

use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::paging::{Listing, Page};
use crate::tags;
use crate::AppState;

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(list, of_lease))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

/// A lease event as the API shows it.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct LeaseEventDetail {
    id: Uuid,
    lease_id: Uuid,
    lease_name: String,
    project_id: String,
    event_type: String,
    time: String,
    status: String,
    attempts: i32,
    last_error: Option<String>,
    claimed_by: Option<String>,
    claim_expires_at: Option<String>,
    retry_at: Option<String>,
    created_at: String,
    updated_at: String,
}

// The `next` link of a full page.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct EventLink {
    rel: String,
    href: String,
}

// A page of lease events; `events_links` (the next page) only when it is
// full ([`LeaseEvents::of`] makes it).
#[derive(serde::Serialize, utoipa::ToSchema)]
struct LeaseEvents {
    events: Vec<LeaseEventDetail>,
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    events_links: Option<Vec<EventLink>>,
}

impl LeaseEvents {
    /// The page of `rows` that `page` asked of the list at `path` (with the
    /// query `q`), linked to the next after its last event when it is full.
    fn of(page: &Page, path: &str, q: &HashMap<String, String>, rows: &[LeaseEventRow]) -> LeaseEvents {
        let last = rows.last().map(|e| e.id.to_string());
        let next = page.next(path, q, rows.len(), last.as_deref());
        LeaseEvents {
            events: rows.iter().map(LeaseEventDetail::of).collect(),
            events_links: next.map(|href| vec![EventLink { rel: "next".to_string(), href }]),
        }
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/events", get(list)).route("/v1/leases/{id}/events", get(of_lease))
}

impl LeaseEventDetail {
    pub fn of(e: &LeaseEventRow) -> LeaseEventDetail {
        let date = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(format_date);
        LeaseEventDetail {
            id: e.id,
            lease_id: e.lease_id,
            lease_name: e.lease_name.clone(),
            project_id: e.project_id.clone(),
            event_type: e.event_type.clone(),
            time: format_date(e.time),
            status: e.status.clone(),
            attempts: e.attempts,
            last_error: e.last_error.clone(),
            claimed_by: e.claimed_by.clone(),
            claim_expires_at: date(e.claim_expires_at),
            retry_at: date(e.retry_at),
            created_at: format_date(e.created_at),
            updated_at: format_date(e.updated_at),
        }
    }
}

fn bad(m: String) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, m)
}

/// The filters both lists accept.
const FILTERS: &[&str] = &["status", "event_type", "lease_id", "limit", "marker", "project_id"];

/// The filters both lists accept, the project decided by the operation.
fn filter(
    app: &App,
    caller: &Caller<'_>,
    q: &HashMap<String, String>,
    page: &Page,
) -> Result<LeaseEventFilter, ApiError> {
    if let Some(k) = q.keys().find(|k| !FILTERS.contains(&k.as_str())) {
        return Err(bad(format!("unknown filter {k:?} (status, event_type, lease_id, limit, marker, project_id)")));
    }
    let project_id = app.events().list_scope(caller, q.get("project_id").map(String::as_str))?;
    let (status, event_type) = kinds(q)?;
    let uuid = |k: &str| -> Result<Option<Uuid>, ApiError> {
        q.get(k).map(|v| Uuid::parse_str(v).map_err(|_| bad(format!("{k} {v:?} is not an id")))).transpose()
    };
    let marker = uuid("marker")?;
    Ok(LeaseEventFilter {
        project_id,
        lease_id: uuid("lease_id")?,
        status,
        event_type,
        marker,
        limit: Some(page.sql_limit()),
    })
}

/// The status and the type asked for.
fn kinds(q: &HashMap<String, String>) -> Result<(Option<LeaseEventStatus>, Option<LeaseEventType>), ApiError> {
    let status = match q.get("status") {
        Some(s) => Some(
            LeaseEventStatus::parse(&s.to_ascii_uppercase())
                .ok_or_else(|| bad(format!("status {s:?} is not UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED")))?,
        ),
        None => None,
    };
    let event_type = match q.get("event_type") {
        Some(t) => Some(
            LeaseEventType::parse(t)
                .ok_or_else(|| bad(format!("event_type {t:?} is not start_lease, before_end_lease or end_lease")))?,
        ),
        None => None,
    };
    Ok((status, event_type))
}

#[utoipa::path(
    get,
    path = "/v1/events",
    tag = tags::ADDITIONS,
    summary = "Lease events (status, event_type, lease_id; limit, marker); own project's",
    params(
        ("status" = Option<String>, Query, description = "UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED"),
        ("event_type" = Option<String>, Query, description = "start_lease, before_end_lease or end_lease"),
        ("lease_id" = Option<String>, Query, description = "One lease's"),
        ("project_id" = Option<String>, Query, description = "One project's (admins)"),
        crate::paging::Page,
    ),
    responses(
        (status = 200, description = "A page of lease events", body = LeaseEvents),
    ),
)]
async fn list(State(state): State<AppState>, ctx: Context, listing: Listing) -> Result<Json<LeaseEvents>, ApiError> {
    let q = &listing.query;
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = caller.may(Rule::EventsList)?;
    let page = listing.page()?;
    let events = app.events().page(may, &filter(&app, &caller, q, &page)?).await?;
    Ok(Json(LeaseEvents::of(&page, "/v1/events", q, &events)))
}

#[utoipa::path(
    get,
    path = "/v1/leases/{id}/events",
    tag = tags::ADDITIONS,
    summary = "A lease's events: due time, status, attempts, last error, claimer",
    params(
        ("status" = Option<String>, Query, description = "UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED"),
        ("event_type" = Option<String>, Query, description = "start_lease, before_end_lease or end_lease"),
        crate::paging::Page,
    ),
    responses(
        (status = 200, description = "A page of the lease's events", body = LeaseEvents),
    ),
)]
async fn of_lease(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    listing: Listing,
) -> Result<Json<LeaseEvents>, ApiError> {
    let q = &listing.query;
    let id = Uuid::parse_str(&id).map_err(|_| {
        ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            ErrorCode::LeaseNotFound,
            format!("lease {id} could not be found"),
        )
    })?;
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.events().of_lease(&caller, id).await?;
    let page = listing.page()?;
    let f = LeaseEventFilter { lease_id: Some(id), project_id: None, ..filter(&app, &caller, q, &page)? };
    let events = app.events().page(may, &f).await?;
    let path = format!("/v1/leases/{id}/events");
    Ok(Json(LeaseEvents::of(&page, &path, q, &events)))
}
