//! `GET /v1/calendar?start=&end=`: hosts (and the other providers leases
//! hold) as rows, reservations as bars. A caller who may not see every
//! project's leases gets other projects' bars as "reserved" and nothing
//! more: the names never leave the server.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use berth_core::dates::{format_date, parse_date, DateSpec};
use berth_core::error::ErrorCode;
use berth_core::time::DateMath;
use berth_store::queries::calendar::CalendarBar;
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// The longest window one answer covers.
const MAX_DAYS: i64 = 400;

/// What others' bars say instead of their lease's name.
pub const RESERVED: &str = "reserved";

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Row {
    /// The provider's id.
    id: Uuid,
    name: String,
    /// A Blazar host (else another provider a lease holds).
    host: bool,
    reservable: bool,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Bar {
    /// The row's provider.
    provider_id: Uuid,
    /// Whether the caller may see this lease (else only "reserved").
    visible: bool,
    /// The lease's name, or "reserved".
    lease_name: String,
    lease_id: Option<Uuid>,
    project_id: Option<String>,
    /// The lease's status (PENDING, ACTIVE, ...), if visible.
    status: Option<String>,
    reservation_id: Option<Uuid>,
    resource_type: String,
    start: String,
    end: String,
    /// Slots of the reservation on this provider.
    slots: i64,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct CalendarBody {
    start: String,
    end: String,
    /// Whether the caller sees every project's names.
    all_projects: bool,
    rows: Vec<Row>,
    bars: Vec<Bar>,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct CalendarDoc {
    calendar: CalendarBody,
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::Invalid, m)
}

/// The window asked for: `start` (default now) to `end` (default a week on).
fn window(q: &HashMap<String, String>, now: DateTime<Utc>) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    if let Some(k) = q.keys().find(|k| !["start", "end"].contains(&k.as_str())) {
        return Err(bad(format!("unknown parameter {k:?} (start, end)")));
    }
    let date = |key: &str| -> Result<Option<DateTime<Utc>>, ApiError> {
        q.get(key)
            .map(|s| {
                Ok(match parse_date(key, s)? {
                    DateSpec::Now => now,
                    DateSpec::At(t) => t,
                })
            })
            .transpose()
    };
    let start = date("start")?.unwrap_or(now);
    let end = match date("end")? {
        Some(e) => e,
        None => start.saturating_plus(Duration::days(7)),
    };
    if end <= start {
        return Err(bad("end must be after start"));
    }
    let longest = start.saturating_plus(Duration::days(MAX_DAYS));
    if end > longest {
        return Err(bad(format!("the window is at most {MAX_DAYS} days")));
    }
    Ok((start, end))
}

/// A bar as `ctx` may see it.
fn shown(b: CalendarBar, ctx: &Context, all_projects: bool) -> Bar {
    let visible = all_projects || b.project_id == ctx.project_id;
    let (start, end) = (format_date(b.start), format_date(b.end));
    if !visible {
        return Bar {
            provider_id: b.provider,
            visible,
            lease_name: RESERVED.into(),
            lease_id: None,
            project_id: None,
            status: None,
            reservation_id: None,
            resource_type: b.resource_type,
            start,
            end,
            slots: b.slots,
        };
    }
    Bar {
        provider_id: b.provider,
        visible,
        lease_name: b.lease_name,
        lease_id: Some(b.lease_id),
        project_id: Some(b.project_id),
        status: Some(b.lease_status),
        reservation_id: Some(b.reservation_id),
        resource_type: b.resource_type,
        start,
        end,
        slots: b.slots,
    }
}

#[utoipa::path(
    get,
    path = "/v1/calendar",
    tag = tags::ADDITIONS,
    summary = "Hosts and their reservations over a window; others' leases only as reserved",
    params(
        ("start" = Option<String>, Query, description = "From (default now)"),
        ("end" = Option<String>, Query, description = "Until (default a week after start; at most 400 days)"),
    ),
    responses(
        (status = 200, description = "Rows and bars", body = CalendarDoc),
    ),
)]
pub(super) async fn get(
    State(state): State<AppState>,
    ctx: Context,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<CalendarDoc>, ApiError> {
    state.rules.authorize(&ctx, Action::CalendarGet, &Target::own(&ctx))?;
    let all_projects = state.rules.visible_project(&ctx, Action::LeasesGetAllProjects).is_none();
    let (start, end) = window(&q, state.store.now().await?)?;
    let cal = state.store.calendar(start, end).await?;
    let rows = cal
        .rows
        .into_iter()
        .map(|r| Row { id: r.provider, name: r.name, host: r.host, reservable: r.reservable })
        .collect();
    let bars = cal.bars.into_iter().map(|b| shown(b, &ctx, all_projects)).collect();
    Ok(Json(CalendarDoc {
        calendar: CalendarBody { start: format_date(start), end: format_date(end), all_projects, rows, bars },
    }))
}
