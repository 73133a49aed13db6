//! The clock anchor: due times are the database's, sleeps are on the local
//! monotonic clock. An anchor pairs one reading of each so that a due time
//! becomes an instant to sleep until, whatever this host's wall clock says.

use std::time::Duration;

use berth_store::queries::lease_events::NextDue;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// A local duration as chrono's (durations sent to the database).
pub(crate) fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The database's time at one instant of the local monotonic clock: turns
/// due times (database time) into instants to sleep until.
#[derive(Clone, Copy)]
pub(crate) struct Anchor {
    database: DateTime<Utc>,
    local: Instant,
}

impl Anchor {
    /// Taken when the database's answer arrived: the database read its
    /// clock before that, so instants computed from it are never early.
    pub(crate) fn of(next: &NextDue) -> Anchor {
        Anchor::at(next, Instant::now())
    }

    /// As [`Anchor::of`], for an answer that arrived at `local`.
    pub(crate) fn at(next: &NextDue, local: Instant) -> Anchor {
        Anchor { database: next.now, local }
    }

    pub(crate) fn instant_of(&self, t: DateTime<Utc>) -> Instant {
        self.local + (t - self.database).to_std().unwrap_or(Duration::ZERO)
    }
}
