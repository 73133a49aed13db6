//! Berth's advice: when a whole lease would fit, and how far a lease could
//! be extended on what it holds. Both answer on the database's clock and
//! book nothing.

use berth_core::dates::{parse_date, DateSpec};
use berth_core::error::ErrorCode;
use berth_core::time::DateMath;
use berth_store::commands::NewReservation;
pub use berth_store::queries::advice::{Availability, Extension};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::{Allowed, App, Caller, Error, Owner, Rule};

/// How far ahead advice looks when not told.
const DEFAULT_SEARCH: Duration = Duration::days(30);

/// How many windows advice answers when not told.
const DEFAULT_LIMIT: usize = 5;

/// Most windows advice answers.
const MAX_LIMIT: u64 = 100;

/// The advice use cases, over one [`App`].
pub struct Advice<'a> {
    app: &'a App,
}

/// A question of when a lease would fit: its reservations (as
/// [`crate::leases::Leases::resolve`] checked them), how long, from when
/// (default now) until when (default 30 days after `from`), how many
/// windows (default 5, at most 100).
pub struct Advise {
    pub wanted: Vec<NewReservation>,
    pub duration: Duration,
    pub from: Option<String>,
    pub until: Option<String>,
    pub limit: Option<u64>,
}

/// The earliest windows, and the range looked in.
pub struct Windows {
    pub windows: Vec<Availability>,
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// A date of the request, `now` being the database's time.
pub(crate) fn date(
    v: Option<&str>,
    field: &str,
    default: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, Error> {
    Ok(match v {
        Some(s) => parse_date(field, s)?.resolve(now),
        None => default,
    })
}

impl Advice<'_> {
    /// The earliest windows in which the whole lease `asked` would fit,
    /// for the caller's project.
    pub async fn advise(&self, caller: &Caller<'_>, a: Allowed, asked: Advise) -> Result<Windows, Error> {
        debug_assert_eq!(a.0, Rule::Availability);
        let now = self.app.store.now().await?;
        let from = date(asked.from.as_deref(), "from", now, now)?.max(now);
        let until = date(asked.until.as_deref(), "until", from.saturating_plus(DEFAULT_SEARCH), now)?;
        let limit = match asked.limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=MAX_LIMIT).contains(&n) => n as usize,
            Some(_) => {
                let e = berth_core::Error::invalid(ErrorCode::InvalidLease, "limit must be 1 to 100");
                return Err(e.into());
            }
        };
        let project = caller.project_id;
        let windows = self.app.store.availability(project, &asked.wanted, asked.duration, from, until, limit).await?;
        Ok(Windows { windows, from, until })
    }

    /// The latest end the lease `id` could be extended to, looking until
    /// `until` (default a year after its end); not found unless the
    /// caller sees the lease.
    pub async fn extension(&self, caller: &Caller<'_>, id: Uuid, until: Option<&str>) -> Result<Extension, Error> {
        let store = &self.app.store;
        let scope = caller.visible_project(Rule::LeasesGetAllProjects);
        let lease = store.lease(id, scope).await?;
        let owner = Owner::Owned { project: &lease.record.project_id, user: &lease.record.user_id };
        caller.authorize(Rule::LeaseExtension, owner)?;
        let horizon = match until {
            Some(s) => match parse_date("until", s)? {
                DateSpec::At(t) => t,
                DateSpec::Now => store.now().await?,
            },
            None => lease.record.end.saturating_plus(Duration::days(365)),
        };
        Ok(store.extension(id, scope, horizon).await?)
    }
}

impl App {
    /// The advice use cases.
    pub fn advice(&self) -> Advice<'_> {
        Advice { app: self }
    }
}
