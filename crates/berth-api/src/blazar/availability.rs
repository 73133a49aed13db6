//! Berth's advice: when a lease would fit (`POST /v1/availability`) and how
//! far a lease could be extended (`GET /v1/leases/{id}/extension`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::Json;
use berth_core::dates::{format_date, parse_date, DateSpec};
use berth_core::error::ErrorCode;
use berth_core::time::DateMath;
use chrono::{DateTime, Duration, Utc};

use super::bodies;
use super::leases::reservations;
use super::{path_id, read};
use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// How far ahead advice looks when not told.
const DEFAULT_SEARCH: Duration = Duration::days(30);

/// A date of the request, `now` being the database's time.
fn date(v: Option<&str>, field: &str, default: DateTime<Utc>, now: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    Ok(match v {
        Some(s) => parse_date(field, s)?.resolve(now),
        None => default,
    })
}

/// Body: `reservations` (as in a lease), `duration` (seconds or "2h"),
/// optional `from` (default now), `until` (default 30 days after `from`) and
/// `limit` (default 5, at most 100). Answers the earliest windows.
#[utoipa::path(
    post,
    path = "/v1/availability",
    tag = tags::ADDITIONS,
    summary = "The earliest windows in which a whole lease would fit",
    request_body = bodies::AvailabilityQuery,
    responses(
        (status = 200, description = "The windows", body = bodies::Availability),
    ),
)]
pub(super) async fn advise(
    State(state): State<AppState>,
    ctx: Context,
    body: Bytes,
) -> Result<Json<bodies::Availability>, ApiError> {
    state.rules.authorize(&ctx, Action::Availability, &Target::own(&ctx))?;
    let asked: bodies::AvailabilityQuery = read::read(&body)?;
    let wanted = crate::gate::app(&state).leases().resolve(reservations(asked.reservations)).await?;
    let duration = asked.duration.read("duration")?;
    let now = state.store.now().await?;
    let from = date(asked.from.as_deref(), "from", now, now)?.max(now);
    let until = date(asked.until.as_deref(), "until", from.saturating_plus(DEFAULT_SEARCH), now)?;
    let limit = match asked.limit {
        None => 5,
        Some(n) if (1..=100).contains(&n) => n as usize,
        Some(_) => return Err(ApiError::bad_request(ErrorCode::InvalidLease, "limit must be 1 to 100")),
    };
    let found = state.store.availability(&ctx.project_id, &wanted, duration, from, until, limit).await?;
    Ok(Json(bodies::Availability {
        availability: found
            .iter()
            .map(|a| bodies::Window { start_date: format_date(a.start), end_date: format_date(a.end) })
            .collect(),
        from: format_date(from),
        until: format_date(until),
    }))
}

/// Query: optional `until` (how far to look; default a year after the end).
#[utoipa::path(
    get,
    path = "/v1/leases/{id}/extension",
    tag = tags::ADDITIONS,
    summary = "The latest end a lease could be extended to",
    params(
        ("until" = Option<String>, Query, description = "How far to look (default a year after the end)"),
    ),
    responses(
        (status = 200, description = "The latest end", body = bodies::OneExtension),
    ),
)]
pub(super) async fn extension(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<bodies::OneExtension>, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let scope = state.rules.visible_project(&ctx, Action::LeasesGetAllProjects);
    let lease = state.store.lease(id, scope).await?;
    let target = Target::owned(&lease.record.project_id, &lease.record.user_id);
    state.rules.authorize(&ctx, Action::LeaseExtension, &target)?;
    let horizon = match q.get("until") {
        Some(s) => match parse_date("until", s)? {
            DateSpec::At(t) => t,
            DateSpec::Now => state.store.now().await?,
        },
        None => lease.record.end.saturating_plus(Duration::days(365)),
    };
    let e = state.store.extension(id, scope, horizon).await?;
    Ok(Json(bodies::OneExtension {
        extension: bodies::Extension {
            lease_id: id,
            end_date: format_date(e.end),
            latest_end_date: e.latest_end.map(format_date),
            horizon: format_date(e.horizon),
            unbounded: e.latest_end.is_none(),
        },
    }))
}
