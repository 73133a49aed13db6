//! The calendar: hosts (and the other providers leases hold) as rows,
//! reservations as bars, over a window of at most [`MAX_DAYS`]. A caller
//! who may not see every project's leases gets other projects' bars with
//! nothing but their place and time: the names never leave this module.

use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_core::time::DateMath;
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use berth_store::queries::calendar::CalendarBar;
pub use berth_store::queries::calendar::CalendarRow;

use crate::{Allowed, App, Caller, Error, Rule};

/// The longest window one calendar covers.
pub const MAX_DAYS: i64 = 400;

/// The window a caller asks for; unset, from now for a week.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    pub start: Option<DateSpec>,
    pub end: Option<DateSpec>,
}

/// A calendar as one caller may see it.
pub struct Calendar {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Whether the caller sees every project's leases.
    pub all_projects: bool,
    pub rows: Vec<CalendarRow>,
    pub bars: Vec<Bar>,
}

/// One reservation's slots on one provider over its lease's window.
pub struct Bar {
    pub provider: Uuid,
    pub resource_type: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Slots of the reservation on this provider (instances; 1 for a host).
    pub slots: i64,
    /// Whose it is, when the caller may see that (else only "reserved").
    pub lease: Option<BarLease>,
}

/// The lease a visible bar belongs to.
pub struct BarLease {
    pub id: Uuid,
    pub name: String,
    pub project_id: String,
    pub status: String,
    pub reservation_id: Uuid,
}

/// The calendar use case, over one [`App`].
pub struct Calendars<'a> {
    app: &'a App,
}

impl Calendars<'_> {
    /// The calendar over the window `asked`, as `caller` (who may get
    /// calendars) may see it.
    pub async fn show(&self, caller: &Caller<'_>, a: Allowed, asked: Asked) -> Result<Calendar, Error> {
        debug_assert_eq!(a.0, Rule::CalendarGet);
        let all_projects = caller.visible_project(Rule::LeasesGetAllProjects).is_none();
        let (start, end) = window(asked, self.app.store.now().await?)?;
        let cal = self.app.store.calendar(start, end).await?;
        let bars = cal.bars.into_iter().map(|b| shown(b, caller.project_id, all_projects)).collect();
        Ok(Calendar { start, end, all_projects, rows: cal.rows, bars })
    }
}

fn invalid(m: impl Into<String>) -> Error {
    Error::Domain(berth_core::Error::invalid(ErrorCode::Invalid, m))
}

/// The window asked for: `start` (default now) to `end` (default a week on).
fn window(asked: Asked, now: DateTime<Utc>) -> Result<(DateTime<Utc>, DateTime<Utc>), Error> {
    let start = asked.start.map_or(now, |s| s.resolve(now));
    let end = asked.end.map_or_else(|| start.saturating_plus(Duration::days(7)), |e| e.resolve(now));
    if end <= start {
        return Err(invalid("end must be after start"));
    }
    if end > start.saturating_plus(Duration::days(MAX_DAYS)) {
        return Err(invalid(format!("the window is at most {MAX_DAYS} days")));
    }
    Ok((start, end))
}

/// A bar as a caller of `project` may see it.
fn shown(b: CalendarBar, project: &str, all_projects: bool) -> Bar {
    let visible = all_projects || b.project_id == project;
    let lease = visible.then_some(BarLease {
        id: b.lease_id,
        name: b.lease_name,
        project_id: b.project_id,
        status: b.lease_status,
        reservation_id: b.reservation_id,
    });
    Bar { provider: b.provider, resource_type: b.resource_type, start: b.start, end: b.end, slots: b.slots, lease }
}

impl App {
    /// The calendar use case.
    pub fn calendar(&self) -> Calendars<'_> {
        Calendars { app: self }
    }
}
