//! The one clock every decision is made on: the database's.
//!
//! Several berthd share one database, and their own clocks drift (a VM
//! resumed from suspend, NTP not yet synced). Whether a lease event is due,
//! when a claim expires, what "now" means in a request and the times
//! written into events are all read from the database server, in the
//! transaction that decides, so a replica with a wrong clock still decides
//! as the others do. The local clock is only compared with it, to tell the
//! operator (`Store::clock_offset`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use berth_core::time::DateMath;
use chrono::{DateTime, Utc};

use crate::client::GenericClient;
use crate::{Store, StoreError};

/// The database's time, read by the statement that runs now (not the
/// transaction's start: a command may have waited on locks since).
pub(crate) async fn now(c: &impl GenericClient) -> Result<DateTime<Utc>, StoreError> {
    // Prepared once per connection: every command asks.
    Ok(crate::sql::query(c, NOW, &[]).await?[0].get("now"))
}

/// The database's time, as [`now`] reads it: to send in a pipeline.
pub(crate) const NOW: &str = "SELECT statement_timestamp() AS now";

/// The database's time at the start of the transaction, for a statement
/// sent in the same pipeline as its `BEGIN` (`tx::Pipelined`): the server
/// runs the pipeline's statements one after the other, so the transaction
/// starts as the first of them runs, before any of them waits on a lock,
/// and this is [`now`]'s instant for a statement at the head of the
/// transaction. Unlike `statement_timestamp()`, the statements after it can
/// name the same instant (`transaction_timestamp()`), so a statement sent
/// with it can already clip to it (`quota::USAGE`).
pub(crate) const STARTED: &str = "SELECT transaction_timestamp() AS started";

/// How far this process's clock is from the database's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    /// Local minus database, in seconds: positive when this clock runs ahead.
    pub seconds: f64,
    /// The round trip of the measurement, in seconds: the offset is known
    /// to about half of it.
    pub round_trip: f64,
}

/// How long one reading of the database's clock is carried forward.
const CARRY: Duration = Duration::from_secs(1);
/// A disagreement this large between the wall clock's and the monotonic
/// clock's elapsed time since a reading (a resume from suspend, which the
/// monotonic clock does not count; the wall clock stepped) ends the carry.
const STEP_MS: i64 = 50;

/// The last reading of the database's clock, with the monotonic instant it
/// was taken at: requests that must name "now" before their command runs
/// (a Placement claim's open-ended window, a lease's `before_end_date:
/// now`) read it without a round trip of their own. One more query per
/// claim cost a third of the claims a second; a reading at most a second
/// old, carried by a clock that cannot jump, costs nothing and stays the
/// database's time to within the monotonic clock's drift over that second.
#[derive(Default)]
pub(crate) struct Carried(Mutex<Option<Reading>>);

#[derive(Clone, Copy)]
struct Reading {
    database: DateTime<Utc>,
    taken: Instant,
    wall: DateTime<Utc>,
}

impl Carried {
    fn now(&self) -> Option<DateTime<Utc>> {
        let r = (*self.0.lock().unwrap_or_else(|p| p.into_inner()))?;
        let elapsed = r.taken.elapsed();
        if elapsed > CARRY {
            return None;
        }
        let elapsed = chrono::Duration::from_std(elapsed).ok()?;
        let wall = local_now() - r.wall;
        let disagreement = wall.checked_sub(&elapsed)?.num_milliseconds();
        if disagreement.abs() > STEP_MS {
            return None;
        }
        Some(r.database.saturating_plus(elapsed))
    }

    fn set(&self, r: Reading) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    }
}

impl Store {
    /// The database's time now, for a request that must name "now" before
    /// its command runs: read from the database at most once a second and
    /// carried forward by the monotonic clock in between ([`Carried`]).
    /// Commands read `statement_timestamp()` in their own transaction.
    pub async fn now(&self) -> Result<DateTime<Utc>, berth_core::Error> {
        if let Some(t) = self.carried.now() {
            return Ok(t);
        }
        let c = self.client().await?;
        let database = now(&c).await?;
        // Stamped after the answer, never before the query: the reading was
        // the database's time at some instant before this one, so carrying
        // it from here can only lag the database, never run ahead of it. A
        // stamp taken before the query ran ahead by however long the query
        // waited to start (tens of milliseconds on a loaded machine), and a
        // claim's window "from now" then began after a following read's
        // `now()`, which did not see it as held.
        let (taken, wall) = (Instant::now(), local_now());
        self.carried.set(Reading { database, taken, wall });
        Ok(database)
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

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the test's own sums, of small known times
mod tests {
    use super::*;
    use crate::testing::TestDatabase;

    async fn database_now(c: &tokio_postgres::Client) -> DateTime<Utc> {
        c.query_one("SELECT statement_timestamp() AS now", &[]).await.unwrap().get("now")
    }

    /// A reading an hour behind `first`, taken now.
    fn old_reading(first: DateTime<Utc>) -> Reading {
        Reading { database: first - chrono::Duration::hours(1), taken: Instant::now(), wall: local_now() }
    }

    /// The time `Store::now` gives between readings is the database's as
    /// read on a connection of the test's own, to within a few
    /// milliseconds, and a stale or stepped reading is not carried.
    #[tokio::test]
    async fn carried_time_is_the_databases() {
        let db = TestDatabase::new().await;
        let store = db.store(2);
        let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        let first = store.now().await.unwrap();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let before = database_now(&client).await;
            let carried = store.now().await.unwrap();
            let after = database_now(&client).await;
            assert!(carried >= first, "{carried} went back from {first}");
            let slack = chrono::Duration::milliseconds(20);
            assert!(carried >= before - slack && carried <= after + slack, "{before} <= {carried} <= {after}");
        }
        // Carried time never runs ahead of the database's: a reading read
        // afresh and then carried is at most what the database says next.
        for _ in 0..200 {
            store
                .carried
                .set(Reading { taken: Instant::now() - CARRY - Duration::from_millis(1), ..old_reading(first) });
            store.now().await.unwrap();
            let carried = store.now().await.unwrap();
            let next = database_now(&client).await;
            assert!(carried <= next, "carried {carried} ran ahead of the database's {next}");
        }
        // A reading older than the carry is read again.
        let old = old_reading(first);
        store.carried.set(Reading { taken: Instant::now() - CARRY - Duration::from_millis(1), ..old });
        assert!(store.now().await.unwrap() > first);
        // So is one the wall clock disagrees with (a resume from suspend).
        store.carried.set(Reading { wall: local_now() - chrono::Duration::seconds(60), ..old });
        assert!(store.now().await.unwrap() > first);
        // A fresh, agreeing reading is carried (here, a wrong one, to tell).
        store.carried.set(old);
        assert!(store.now().await.unwrap() < first, "a fresh reading is used without a round trip");
    }
}
