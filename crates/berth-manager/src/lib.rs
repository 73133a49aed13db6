//! berth-manager: fires every lease event on time.
//!
//! Claims due lease events in one statement (`FOR UPDATE SKIP LOCKED`) with a
//! claim expiry it renews while a plugin hook runs, records each outcome as
//! log events, and rescues claims whose owner died. It knows no HTTP and
//! writes no SQL of its own: it calls berth-store and berth-plugins, and
//! the use cases it shares with the API (healing what waits, telling the
//! lease policy of an end) through berth-app.
//!
//! Any number of managers (one per berthd) share a database: each claims
//! disjoint batches. A manager sleeps until the next due time, or until a
//! notification says an event became due earlier, and looks at least every
//! poll interval in case a notification was lost. Hooks run outside any
//! transaction; their outcomes are recorded in batches by one recorder task.
//! A failed attempt is retried with exponential backoff and jitter (by any
//! manager: the event goes back to UNDONE with a retry time) until the
//! configured number of attempts, then the event is ERROR.
//!
//! Every time it decides on is the database's: the claim statement decides
//! what is due and when claims expire, and the manager asks the database
//! how long until the next due time. It only sleeps on the local monotonic
//! clock, so a berthd whose wall clock is wrong neither fires early nor
//! sleeps past due.
//!
//! Where each part lives: `run` (the loop that sleeps, wakes and shuts
//! down), `claim` (claiming due events, rescues included), `fire` (one
//! attempt at a claimed event), `retry` (what a failed attempt becomes),
//! `record` (writing outcomes in batches), `renew` (keeping claims alive),
//! `sweep` (periodic chores), `heal` (on_heal calls, heals retried), `clock` (database time against the local
//! monotonic clock), `state` (what a running manager holds).

pub mod config;
pub mod hooks;
pub mod metrics;

mod claim;
mod clock;
mod fire;
mod heal;
mod reclaim;
mod record;
mod renew;
mod retry;
mod run;
mod state;
mod sweep;
mod update;

use std::sync::Arc;

use berth_app::Policy;
use berth_plugins::Registry;
use berth_store::Store;

pub use config::ManagerConfig;
pub use retry::retry_delay;

/// Database connections a running manager keeps out of a pool of
/// `pool_size` for its claims: one per claim lane.
pub fn kept_connections(cfg: &ManagerConfig, pool_size: usize) -> usize {
    cfg.claim_lanes(pool_size)
}

use state::Inner;

/// The manager of one berthd. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl Manager {
    pub fn new(store: Store, registry: Arc<Registry>, cfg: ManagerConfig) -> Manager {
        let lanes = cfg.claim_lanes(store.pool_status().max);
        Manager { inner: Arc::new(Inner::new(store, registry, cfg, lanes)) }
    }

    /// Tells `policy` (its external service's `on-end`) of every lease
    /// whose end event this manager finishes. Before the manager runs.
    pub fn with_policy(mut self, policy: Arc<Policy>) -> Manager {
        let inner = Arc::get_mut(&mut self.inner).expect("set before the manager is shared");
        inner.app = berth_app::App::new(inner.store.clone(), inner.registry.clone(), policy);
        inner.tells_ends = true;
        self
    }

    /// The name this manager claims under.
    pub fn id(&self) -> &str {
        &self.inner.id
    }
}
