//! The one clock every decision is made on: the database's.
//!
//! Several berthd share one database, and their own clocks drift (a VM
//! resumed from suspend, NTP not yet synced). Whether a lease event is due,
//! when a claim expires, what "now" means in a request and the times
//! written into events are all read from the database server, in the
//! transaction that decides, so a replica with a wrong clock still decides
//! as the others do. The local clock is only compared with it, to tell the
//! operator (`Store::clock_offset`).

use berth_core::time::DateMath;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use crate::{Store, StoreError};

/// The database's time, read by the statement that runs now (not the
/// transaction's start: a command may have waited on locks since).
pub(crate) async fn now(c: &impl GenericClient) -> Result<DateTime<Utc>, StoreError> {
    Ok(c.query_one("SELECT statement_timestamp()", &[]).await?.get(0))
}

/// How far this process's clock is from the database's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    /// Local minus database, in seconds: positive when this clock runs ahead.
    pub seconds: f64,
    /// The round trip of the measurement, in seconds: the offset is known
    /// to about half of it.
    pub round_trip: f64,
}

impl Store {
    /// The database's time now, for a request that must name "now" before
    /// its command runs (one round trip).
    pub async fn now(&self) -> Result<DateTime<Utc>, berth_core::Error> {
        let c = self.client().await?;
        Ok(now(&c).await?)
    }

    /// Measures the local clock against the database's: the database's
    /// time is taken as read halfway through the round trip.
    pub async fn clock_offset(&self) -> Result<ClockOffset, berth_core::Error> {
        let c = self.client().await?;
        let sent = local_now();
        let db = now(&c).await?;
        let back = local_now();
        let round_trip = (back - sent).num_microseconds().unwrap_or(0) as f64 / 1e6;
        let half = chrono::Duration::microseconds((back - sent).num_microseconds().unwrap_or(0) / 2);
        let local = sent.saturating_plus(half);
        Ok(ClockOffset { seconds: (local - db).num_microseconds().unwrap_or(0) as f64 / 1e6, round_trip })
    }
}

/// The local wall clock, read only to measure how far it is off.
#[allow(clippy::disallowed_methods)] // the one place the local clock is compared, never decided on
fn local_now() -> DateTime<Utc> {
    Utc::now()
}
