//! Berth's advice: when a lease would fit (`POST /v1/availability`) and how
//! far a lease could be extended (`GET /v1/leases/{id}/extension`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::Json;
use berth_app::advice::{Advise, Bound, ExtensionAdvice};
use berth_app::Rule;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use uuid::Uuid;

use super::bodies;
use super::leases::reservations;
use super::{path_id, read};
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = caller.may(Rule::Availability)?;
    let asked: bodies::AvailabilityQuery = read::read(&body)?;
    let wanted = app.leases().resolve(reservations(asked.reservations)).await?;
    let duration = asked.duration.read("duration")?;
    let asked = Advise { wanted, duration, from: asked.from, until: asked.until, limit: asked.limit };
    let found = app.advice().advise(&caller, may, asked).await?;
    Ok(Json(bodies::Availability {
        availability: found
            .windows
            .iter()
            .map(|a| bodies::Window { start_date: format_date(a.start), end_date: format_date(a.end) })
            .collect(),
        from: format_date(found.from),
        until: format_date(found.until),
    }))
}

/// Query: optional `until` (how far to look; default a year after the end).
/// Answers the latest end on what the lease holds (each reservation's and
/// the lease's) and by the lease policy, and whether an extension asked
/// now would be granted.
#[utoipa::path(
    get,
    path = "/v1/leases/{id}/extension",
    tag = tags::ADDITIONS,
    summary = "How far a lease could be extended, and whether now",
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
    let until = q.get("until").map(String::as_str);
    let advice = app(&state).advice().extension(&caller(&state, &ctx), id, until).await?;
    Ok(Json(extension_body(id, &advice)))
}

/// The extension advice as the API writes it.
fn extension_body(id: Uuid, advice: &ExtensionAdvice) -> bodies::OneExtension {
    let (e, terms, latest) = (&advice.fits, &advice.terms, advice.latest_end());
    bodies::OneExtension {
        extension: bodies::Extension {
            lease_id: id,
            end_date: format_date(e.end),
            latest_end_date: latest.map(|(t, _)| format_date(t)),
            limited_by: latest.map(|(_, b)| match b {
                Bound::Capacity => "capacity",
                Bound::Policy => "policy",
            }),
            horizon: format_date(e.horizon),
            unbounded: latest.is_none(),
            extendable: advice.extendable(),
            opens_at: terms.opens.map(format_date),
            closes_at: terms.closes.map(format_date),
            minimum_extension: terms.minimum.map(|d| d.num_seconds()),
            reservations: e
                .reservations
                .iter()
                .map(|r| bodies::ReservationExtension {
                    id: r.id,
                    resource_type: r.resource_type.clone(),
                    latest_end_date: r.latest_end.map(format_date),
                })
                .collect(),
        },
    }
}
