//! `GET /v1/calendar?start=&end=`: hosts (and the other providers leases
//! hold) as rows, reservations as bars. A caller who may not see every
//! project's leases gets other projects' bars as "reserved" and nothing
//! more: the names never leave the server.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use berth_app::calendar::{Asked, Bar as Shown, Calendar};
use berth_core::dates::{format_date, parse_date};
use berth_core::error::ErrorCode;
use uuid::Uuid;

use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

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

/// The window asked for, as the query says it.
fn asked(q: &HashMap<String, String>) -> Result<Asked, ApiError> {
    if let Some(k) = q.keys().find(|k| !["start", "end"].contains(&k.as_str())) {
        return Err(bad(format!("unknown parameter {k:?} (start, end)")));
    }
    let date = |key: &str| q.get(key).map(|s| parse_date(key, s)).transpose();
    Ok(Asked { start: date("start")?, end: date("end")? })
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
    let c = caller(&state, &ctx);
    let may = c.may(berth_app::Rule::CalendarGet)?;
    let cal = app(&state).calendar().show(&c, may, asked(&q)?).await?;
    Ok(Json(CalendarDoc { calendar: body(cal) }))
}

fn body(cal: Calendar) -> CalendarBody {
    let rows = cal
        .rows
        .into_iter()
        .map(|r| Row { id: r.provider, name: r.name, host: r.host, reservable: r.reservable })
        .collect();
    let bars = cal.bars.into_iter().map(bar).collect();
    CalendarBody {
        start: format_date(cal.start),
        end: format_date(cal.end),
        all_projects: cal.all_projects,
        rows,
        bars,
    }
}

/// A bar as the caller may see it: others' say only "reserved".
fn bar(b: Shown) -> Bar {
    let (start, end) = (format_date(b.start), format_date(b.end));
    let (visible, lease) = (b.lease.is_some(), b.lease);
    Bar {
        provider_id: b.provider,
        visible,
        lease_name: lease.as_ref().map_or_else(|| RESERVED.to_string(), |l| l.name.clone()),
        lease_id: lease.as_ref().map(|l| l.id),
        project_id: lease.as_ref().map(|l| l.project_id.clone()),
        status: lease.as_ref().map(|l| l.status.clone()),
        reservation_id: lease.as_ref().map(|l| l.reservation_id),
        resource_type: b.resource_type,
        start,
        end,
        slots: b.slots,
    }
}
