//! `[manager]`: how often to look, how long a claim holds, how hard to retry.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ManagerConfig {
    /// Run the manager in this berthd (any number may share a database).
    pub enabled: bool,
    /// This manager's name in claims and the log; host, process and a random
    /// suffix when absent.
    pub id: Option<String>,
    /// Look for due events at least this often, whatever the notifications
    /// say: a lost notification costs at most this long.
    pub poll_interval_ms: u64,
    /// How long a claim holds without renewal. Claims are renewed while hooks
    /// run; a berthd that dies loses its claims this long after its last
    /// renewal, and another takes them back.
    pub claim_ttl_ms: u64,
    /// Most events claimed by one statement.
    pub batch_size: i64,
    /// Claims (each on a connection kept for it) and outcome records in
    /// flight at once while a burst is due. Unset: sized as the API's claim
    /// lanes are, one per two cores, 2 to 8, at most a quarter of the pool
    /// (2 on 2 cores, 8 on 16).
    pub claim_lanes: Option<usize>,
    /// Most events whose hooks run at once in this berthd.
    pub max_in_flight: usize,
    /// Attempts of a lease event before it is marked ERROR.
    pub max_attempts: i32,
    /// The first pause before a retry; doubles each attempt (with jitter) up
    /// to `retry_max_ms`.
    pub retry_min_ms: u64,
    pub retry_max_ms: u64,
    /// Notifications arriving within this long of each other cause one look.
    pub debounce_ms: u64,
    /// While due events are being claimed, the recorder waits this long at
    /// most before writing outcomes (it competes with the claims for the
    /// database); 0, the default: it never waits (measured, waiting cost
    /// throughput and did not clearly help bursts: docs/performance.md).
    /// Never more than an eighth of `claim_ttl_ms` (the claims it holds
    /// are renewed meanwhile).
    pub record_wait_ms: u64,
    /// Capacity lent to preemptible consumers is reclaimed this long before
    /// an owner needs it: the time the plugins have to empty it. A reclaim
    /// is made up to a poll interval after it falls due: keep the lead
    /// above the interval.
    pub reclaim_lead_s: u64,
    /// On shutdown, how long running hooks may take to finish; the claims of
    /// those that do not are left to expire (another berthd retries them).
    pub shutdown_grace_ms: u64,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            enabled: true,
            id: None,
            poll_interval_ms: 5_000,
            claim_ttl_ms: 30_000,
            batch_size: 256,
            claim_lanes: None,
            max_in_flight: 512,
            max_attempts: 5,
            retry_min_ms: 1_000,
            retry_max_ms: 300_000,
            debounce_ms: 10,
            record_wait_ms: 0,
            shutdown_grace_ms: 10_000,
            reclaim_lead_s: berth_store::DEFAULT_RECLAIM_LEAD_S.unsigned_abs(),
        }
    }
}

impl ManagerConfig {
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms.max(10))
    }
    /// Due times this far ahead need not wake this manager: it looks at
    /// least once per poll interval, and the look tells it the next due
    /// time. Twice the interval, and a second for the time a creation takes
    /// between inserting its events and committing them.
    pub fn wake_horizon(&self) -> Duration {
        self.poll_interval() * 2 + Duration::from_secs(1)
    }
    pub fn reclaim_lead(&self) -> Duration {
        Duration::from_secs(self.reclaim_lead_s)
    }
    pub fn claim_ttl(&self) -> Duration {
        Duration::from_millis(self.claim_ttl_ms.max(100))
    }
    pub fn debounce(&self) -> Duration {
        Duration::from_millis(self.debounce_ms)
    }
    /// How long the recorder waits at most for claims being made.
    pub fn record_wait(&self) -> Duration {
        Duration::from_millis(self.record_wait_ms).min(self.claim_ttl() / 8)
    }

    /// The claim lanes of a manager on a pool of `pool_size` connections:
    /// as set, else sized to this machine ([`berth_store::commands::sized_claim_lanes`]).
    pub fn claim_lanes(&self, pool_size: usize) -> usize {
        self.claim_lanes
            .unwrap_or_else(|| berth_store::commands::sized_claim_lanes(berth_store::commands::cores(), pool_size))
    }

    /// Checks what would make the manager misbehave.
    pub fn check(&self) -> Result<(), String> {
        if self.max_attempts < 1 {
            return Err("manager.max_attempts must be at least 1".into());
        }
        if self.batch_size < 1 || self.max_in_flight < 1 {
            return Err("manager.batch_size and manager.max_in_flight must be at least 1".into());
        }
        if self.claim_lanes.is_some_and(|l| !(1..=MAX_CLAIM_LANES).contains(&l)) {
            return Err(format!("manager.claim_lanes must be from 1 to {MAX_CLAIM_LANES}"));
        }
        if self.retry_max_ms < self.retry_min_ms {
            return Err("manager.retry_max_ms must not be below manager.retry_min_ms".into());
        }
        // The wake horizon (twice the interval) is written to the database
        // as an interval, whose range ends near 178 million years.
        if self.poll_interval_ms > MAX_POLL_INTERVAL_MS {
            return Err(format!("manager.poll_interval_ms must be at most {MAX_POLL_INTERVAL_MS} (a day)"));
        }
        if self.reclaim_lead_s > MAX_RECLAIM_LEAD_S {
            return Err(format!("manager.reclaim_lead_s must be at most {MAX_RECLAIM_LEAD_S} (a week)"));
        }
        Ok(())
    }
}

/// More lanes than this keep more connections than any burst uses.
const MAX_CLAIM_LANES: usize = 64;

/// A week: lending nothing for longer is lending nothing.
const MAX_RECLAIM_LEAD_S: u64 = 604_800;

/// A day: a manager that looks less often is misconfigured.
const MAX_POLL_INTERVAL_MS: u64 = 86_400_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_lanes_are_sized_to_the_machine_unless_set() {
        let cores = berth_store::commands::cores();
        let sized = ManagerConfig::default().claim_lanes(32);
        assert_eq!(sized, berth_store::commands::sized_claim_lanes(cores, 32));
        assert!((2..=8).contains(&sized), "{sized} lanes on {cores} cores");
        let set = ManagerConfig { claim_lanes: Some(5), ..Default::default() };
        assert_eq!(set.claim_lanes(32), 5);
        for bad in [0, MAX_CLAIM_LANES + 1] {
            let e = ManagerConfig { claim_lanes: Some(bad), ..Default::default() }.check().unwrap_err();
            assert!(e.contains("claim_lanes"), "{e}");
        }
    }

    #[test]
    fn a_reclaim_lead_past_a_week_is_refused() {
        let cfg = |reclaim_lead_s| ManagerConfig { reclaim_lead_s, ..Default::default() };
        assert!(cfg(MAX_RECLAIM_LEAD_S).check().is_ok());
        assert!(cfg(0).check().is_ok());
        let e = cfg(MAX_RECLAIM_LEAD_S + 1).check().unwrap_err();
        assert!(e.contains("reclaim_lead_s"), "{e}");
    }

    #[test]
    fn a_poll_interval_past_a_day_is_refused() {
        let cfg = |poll_interval_ms| ManagerConfig { poll_interval_ms, ..Default::default() };
        assert!(cfg(MAX_POLL_INTERVAL_MS).check().is_ok());
        for too_long in [MAX_POLL_INTERVAL_MS + 1, u64::MAX] {
            let e = cfg(too_long).check().unwrap_err();
            assert!(e.contains("poll_interval_ms"), "{e}");
        }
    }
}
