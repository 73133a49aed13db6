//! What a running manager holds: its store and plugins, and the claimed
//! events it is working on, shared by the loop, the hooks, the recorder
//! and the renewer.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use berth_plugins::policy::LeaseValues;
use berth_plugins::{Policy, Registry};
use berth_store::Store;
use tokio::sync::{Notify, Semaphore};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::config::ManagerConfig;

/// A claimed event being worked on in this berthd.
pub(crate) struct Running {
    pub(crate) attempt: i32,
    /// When the claim expires at the latest, on the local monotonic clock
    /// (counted from before the claim was asked for, so never later than
    /// the database's expiry).
    pub(crate) expires: Instant,
    pub(crate) abort: Option<AbortHandle>,
    /// An end event whose hooks all succeeded: the lease the policy service
    /// is told of once the outcome is recorded.
    pub(crate) ended: Option<LeaseValues>,
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) registry: Arc<Registry>,
    /// Told when a lease ends (its end event done).
    pub(crate) policy: Option<Arc<Policy>>,
    pub(crate) cfg: ManagerConfig,
    pub(crate) id: String,
    /// Wakes the scheduler: something finished, or hook slots freed up.
    pub(crate) wake: Notify,
    /// The scheduler stopped claiming for lack of hook slots.
    pub(crate) starved: AtomicBool,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) running: Mutex<HashMap<Uuid, Running>>,
    pub(crate) sweeping: AtomicBool,
    /// A pass over the `on_heal` calls owed is under way.
    pub(crate) healing: AtomicBool,
}

impl Inner {
    pub(crate) fn new(store: Store, registry: Arc<Registry>, cfg: ManagerConfig) -> Inner {
        let id = cfg.id.clone().unwrap_or_else(default_id);
        let permits = Arc::new(Semaphore::new(cfg.max_in_flight));
        Inner {
            store,
            registry,
            policy: None,
            cfg,
            id,
            wake: Notify::new(),
            starved: AtomicBool::new(false),
            permits,
            running: Mutex::new(HashMap::new()),
            sweeping: AtomicBool::new(false),
            healing: AtomicBool::new(false),
        }
    }
}

fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "berthd".into());
    let suffix: u16 = rand::random();
    format!("{host}-{}-{suffix:04x}", std::process::id())
}
