//! Berth's advice: when a whole lease would fit, and how far a lease could
//! be extended on what it holds. Both answer on the database's clock and
//! book nothing.

use berth_core::dates::parse_date;
use berth_core::error::ErrorCode;
use berth_core::policy::ExtensionTerms;
use berth_core::time::DateMath;
use berth_store::commands::NewReservation;
pub use berth_store::queries::advice::{Availability, Extension, ReservationExtension};
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

    /// How far the lease `id` could be extended, on what it holds
    /// (looking until `until`, default a year after its end) and by the
    /// lease policy; not found unless the caller sees the lease.
    pub async fn extension(
        &self,
        caller: &Caller<'_>,
        id: Uuid,
        until: Option<&str>,
    ) -> Result<ExtensionAdvice, Error> {
        let store = &self.app.store;
        let scope = caller.visible_project(Rule::LeasesGetAllProjects);
        let lease = store.lease(id, scope).await?;
        let owner = Owner::Owned { project: &lease.record.project_id, user: &lease.record.user_id };
        caller.authorize(Rule::LeaseExtension, owner)?;
        let now = store.now().await?;
        let horizon = match until {
            Some(s) => parse_date("until", s)?.resolve(now),
            None => lease.record.end.saturating_plus(Duration::days(365)),
        };
        let fits = store.extension(id, scope, horizon).await?;
        let terms = self.app.policy.rules.extension_terms(&lease.record.project_id, lease.record.start, fits.end);
        Ok(ExtensionAdvice { fits, terms, now })
    }
}

/// How far a lease could be extended: as far as what it holds allows
/// (`fits`), and the lease policy (`terms`), asked at `now`.
pub struct ExtensionAdvice {
    pub fits: Extension,
    pub terms: ExtensionTerms,
    pub now: DateTime<Utc>,
}

/// What bounds an extension first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Another lease, or an inventory, on what the lease holds.
    Capacity,
    /// The maximum lease duration.
    Policy,
}

impl ExtensionAdvice {
    /// The latest end both allow, and which bounds it; `None`: free until
    /// the horizon and no maximum.
    pub fn latest_end(&self) -> Option<(DateTime<Utc>, Bound)> {
        match (self.fits.latest_end, self.terms.latest_end) {
            (Some(c), Some(p)) if p < c => Some((p, Bound::Policy)),
            (Some(c), _) => Some((c, Bound::Capacity)),
            (None, Some(p)) if p < self.fits.horizon => Some((p, Bound::Policy)),
            (None, _) => None,
        }
    }

    /// Whether an extension asked now would be granted, by at least the
    /// minimum (or a second): the lease has not ended, the window is
    /// open, the cut-off not passed, and there is room.
    pub fn extendable(&self) -> bool {
        let end = self.fits.end;
        let room = self.latest_end().map_or(self.fits.horizon, |(t, _)| t);
        let least = self.terms.minimum.unwrap_or(Duration::seconds(1)).max(Duration::seconds(1));
        self.now < end
            && self.terms.opens.is_none_or(|t| self.now >= t)
            && self.terms.closes.is_none_or(|t| self.now <= t)
            && room - end >= least
    }
}

impl App {
    /// The advice use cases.
    pub fn advice(&self) -> Advice<'_> {
        Advice { app: self }
    }
}
