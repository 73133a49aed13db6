//! Read scale: hot standbys serving reads that may be slightly stale.
//!
//! Only queries that say so (`Store::read_client`) and only inside a scope
//! the API opens for a GET ([`stale_ok`]) go to a standby; everything else,
//! and every command (claims, quota checks, lease creation: whatever
//! decides), stays on the primary. So a stale read can at worst lead a
//! client to a write that is refused with a 409, never to an over-commit.
//!
//! A standby is used while its lag is within `max_replica_lag_ms`: it
//! streams from its primary, and it has replayed all it received or its
//! last replayed commit is no older than the bound
//! (`pg_last_xact_replay_timestamp()`; an idle primary sends no commits, so
//! a standby that replayed everything is not behind however old that is).
//! A read carrying a token (the primary's WAL position after a write,
//! [`Lsn`]) goes only to a standby that has replayed that far
//! (`pg_last_wal_replay_lsn()`), else to the primary.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::conn::{Checkout, Pool};

use crate::{PoolSettings, Store, StoreError};

/// How long a standby's lag, once read, is taken as still true.
const RECHECK: Duration = Duration::from_millis(100);
/// How long a standby that failed is left alone.
const BACK_OFF: Duration = Duration::from_secs(1);

/// A position in the primary's WAL, written as PostgreSQL writes a
/// `pg_lsn` (`16/B374D848`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl FromStr for Lsn {
    type Err = ();
    fn from_str(s: &str) -> Result<Lsn, ()> {
        let (hi, lo) = s.trim().split_once('/').ok_or(())?;
        let hi = u32::from_str_radix(hi, 16).map_err(|_| ())?;
        let lo = u32::from_str_radix(lo, 16).map_err(|_| ())?;
        Ok(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

tokio::task_local! {
    /// Set while a read that may be stale runs: the token it carries.
    static STALE_OK: Option<Lsn>;
}

/// Runs `f` (a GET's handler) with its reads allowed on a standby that is
/// within the lag bound and has replayed `after`, when given.
pub async fn stale_ok<F: std::future::Future>(after: Option<Lsn>, f: F) -> F::Output {
    STALE_OK.scope(after, f).await
}

/// The token of the [`stale_ok`] scope this runs in, if any: for work the
/// scope's reads go on with after it ends (a streamed answer's later pages).
pub fn stale_ok_scope() -> Option<Option<Lsn>> {
    STALE_OK.try_with(|a| *a).ok()
}

/// The standbys, tried in turn.
pub(crate) struct Replicas {
    list: Vec<Replica>,
    max_lag: Duration,
    next: AtomicUsize,
}

struct Replica {
    pool: Pool,
    health: Mutex<Health>,
}

#[derive(Clone, Copy)]
struct Health {
    checked: Option<Instant>,
    usable: bool,
    replayed: Lsn,
}

/// A standby's state in one round trip: streaming, its lag in
/// milliseconds (0 when it replayed all it received), what it replayed.
/// A server that is not in recovery (a standby promoted since) is a
/// primary: never behind.
const HEALTH: &str = "SELECT (NOT pg_is_in_recovery()
            OR EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status IS NULL OR status = 'streaming')) AS streaming,
        CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
             ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000, 1e12)
        END::float8 AS lag_ms,
        coalesce(pg_last_wal_replay_lsn(), pg_current_wal_insert_lsn())::text AS replayed";

impl Replicas {
    pub(crate) fn connect(urls: &[String], max_lag: Duration, settings: &PoolSettings) -> Result<Replicas, StoreError> {
        let list = urls.iter().map(|url| Replica::connect(url, settings)).collect::<Result<_, _>>()?;
        Ok(Replicas { list, max_lag, next: AtomicUsize::new(0) })
    }

    /// A connection to a standby that may serve a read after `after`, if
    /// any may.
    async fn pick(&self, after: Option<Lsn>) -> Option<Checkout> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.list.len() {
            let replica = &self.list[start.wrapping_add(i) % self.list.len()];
            if let Some(c) = replica.usable(self.max_lag, after).await {
                return Some(c);
            }
        }
        None
    }
}

impl Replica {
    fn connect(url: &str, settings: &PoolSettings) -> Result<Replica, StoreError> {
        // A standby that has no free connection at once is skipped: the
        // primary is there.
        let (pool, _) = crate::open_pool(url, settings, Some(BACK_OFF))?;
        let health = Health { checked: None, usable: false, replayed: Lsn(0) };
        Ok(Replica { pool, health: Mutex::new(health) })
    }

    async fn usable(&self, max_lag: Duration, after: Option<Lsn>) -> Option<Checkout> {
        let known = *self.health.lock().expect("health lock");
        let fresh = known.checked.is_some_and(|t| t.elapsed() < if known.usable { RECHECK } else { BACK_OFF });
        if fresh && !known.usable {
            return None;
        }
        let Ok(client) = self.pool.get().await.map(Checkout::new) else {
            self.set(Health { checked: Some(Instant::now()), usable: false, replayed: known.replayed });
            return None;
        };
        let caught_up = |h: &Health| after.is_none_or(|lsn| h.replayed >= lsn);
        let health = if fresh && caught_up(&known) {
            known
        } else {
            let health = match client.query_one(HEALTH, &[]).await {
                Ok(row) => Health {
                    checked: Some(Instant::now()),
                    usable: row.get::<_, bool>("streaming")
                        && row.get::<_, f64>("lag_ms") <= max_lag.as_secs_f64() * 1000.0,
                    replayed: row.get::<_, String>("replayed").parse().unwrap_or(Lsn(0)),
                },
                Err(_) => Health { checked: Some(Instant::now()), usable: false, replayed: known.replayed },
            };
            self.set(health);
            health
        };
        (health.usable && caught_up(&health)).then_some(client)
    }

    fn set(&self, health: Health) {
        *self.health.lock().expect("health lock") = health;
    }
}

/// Who served the reads a standby may serve.
const READS: &str = "berth_db_reads_total";

/// Describes the reads' counter, at zero from the start.
pub fn describe() {
    metrics::describe_counter!(READS, "Reads that a standby may serve, by who served them (standby, primary)");
    for by in ["standby", "primary"] {
        let _ = metrics::counter!(READS, "served_by" => by);
    }
}

impl Store {
    /// Serves the reads that may be stale from these standbys too (see the
    /// module's documentation).
    pub fn with_replicas(
        mut self,
        urls: &[String],
        max_lag: Duration,
        settings: &PoolSettings,
    ) -> Result<Store, StoreError> {
        if !urls.is_empty() {
            self.replicas = Some(std::sync::Arc::new(Replicas::connect(urls, max_lag, settings)?));
        }
        Ok(self)
    }

    /// A connection for a read that may be stale: a standby's inside a
    /// [`stale_ok`] scope when one may serve it, else the primary's.
    pub(crate) async fn read_client(&self) -> Result<Checkout, StoreError> {
        if let (Some(replicas), Ok(after)) = (&self.replicas, STALE_OK.try_with(|a| *a)) {
            if let Some(c) = replicas.pick(after).await {
                metrics::counter!(READS, "served_by" => "standby").increment(1);
                return Ok(c);
            }
            metrics::counter!(READS, "served_by" => "primary").increment(1);
        }
        self.client().await
    }

    /// Whether reads may go to standbys (the API then gives writes a token).
    pub fn has_replicas(&self) -> bool {
        self.replicas.is_some()
    }

    /// A token for what has been written so far: the primary's WAL insert
    /// position now, at or past the commit of every write answered before.
    pub async fn write_token(&self) -> Result<Lsn, berth_core::Error> {
        let c = self.client().await?;
        let row =
            c.query_one("SELECT pg_current_wal_insert_lsn()::text AS lsn", &[]).await.map_err(StoreError::from)?;
        row.get::<_, String>("lsn")
            .parse()
            .map_err(|()| berth_core::Error::internal("a WAL position that does not parse"))
    }
}

#[cfg(test)]
mod tests {
    use super::Lsn;

    #[test]
    fn lsns_read_and_write_as_postgresql_does() {
        for s in ["0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF"] {
            assert_eq!(s.parse::<Lsn>().unwrap().to_string(), s);
        }
        assert!("16/B374D848".parse::<Lsn>().unwrap() > "16/B374D847".parse::<Lsn>().unwrap());
        assert!("2/0".parse::<Lsn>().unwrap() > "1/FFFFFFFF".parse::<Lsn>().unwrap());
        for bad in ["", "16", "x/1", "1/2/3", "100000000/0"] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad}");
        }
    }
}
