//! What a running manager holds: its store and plugins, and the claimed
//! events it is working on, shared by the loop, the hooks, the recorder
//! and the renewer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use berth_app::policy::LeaseValues;
use berth_app::{App, Policy};
use berth_plugins::Registry;
use berth_store::commands::KeptConnection;
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
    /// The hooks are over and the outcome is with the recorder, whose
    /// write finds out whether the claim still held: the renewer, which
    /// cannot tell a claim taken back from one just recorded, leaves the
    /// entry to it.
    pub(crate) recording: bool,
    /// An end event whose hooks all succeeded: the lease the policy service
    /// is told of once the outcome is recorded.
    pub(crate) ended: Option<LeaseValues>,
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) registry: Arc<Registry>,
    /// The use cases the manager shares with the API: healing what waits,
    /// telling the lease policy of an end.
    pub(crate) app: App,
    /// Whether the lease policy is told when a lease ends (its end event
    /// done): set with a policy.
    pub(crate) tells_ends: bool,
    pub(crate) cfg: ManagerConfig,
    pub(crate) id: String,
    /// Most claims made at once while a burst is claimed, and most outcome
    /// batches recorded at once (`ManagerConfig::claim_lanes`).
    pub(crate) lanes: usize,
    /// Wakes the scheduler: something finished, or hook slots freed up.
    pub(crate) wake: Notify,
    /// The scheduler stopped claiming for lack of hook slots.
    pub(crate) starved: AtomicBool,
    /// Wakes the scheduler at once (no debounce): it starved, and enough
    /// hook slots for a batch are free again.
    pub(crate) refill: Notify,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) running: Mutex<HashMap<Uuid, Running>>,
    pub(crate) sweeping: AtomicBool,
    /// A pass over the `on_heal` calls owed is under way.
    pub(crate) healing: AtomicBool,
    /// A pass over the reclaims due is under way.
    pub(crate) reclaiming: AtomicBool,
    /// Due events are being claimed (the recorder waits for them).
    pub(crate) claiming: AtomicBool,
    /// Told when claiming stops.
    pub(crate) claimed: Notify,
    /// The connection each claim lane keeps for its claims: no pool
    /// checkout before a claim, and the claim statement prepared (and
    /// planned) once per lane rather than on every pooled connection.
    pub(crate) kept: Vec<tokio::sync::Mutex<KeptConnection>>,
}

impl Inner {
    pub(crate) fn new(store: Store, registry: Arc<Registry>, cfg: ManagerConfig, lanes: usize) -> Inner {
        let lanes = lanes.max(1);
        let id = cfg.id.clone().unwrap_or_else(default_id);
        let permits = Arc::new(Semaphore::new(cfg.max_in_flight));
        Inner {
            app: App::new(store.clone(), registry.clone(), Arc::new(Policy::default())),
            store,
            registry,
            tells_ends: false,
            cfg,
            id,
            lanes,
            wake: Notify::new(),
            starved: AtomicBool::new(false),
            refill: Notify::new(),
            permits,
            running: Mutex::new(HashMap::new()),
            sweeping: AtomicBool::new(false),
            healing: AtomicBool::new(false),
            reclaiming: AtomicBool::new(false),
            claiming: AtomicBool::new(false),
            claimed: Notify::new(),
            kept: (0..lanes).map(|_| Default::default()).collect(),
        }
    }
}

impl Inner {
    /// A hook slot was given back: a starved scheduler claims again once
    /// half a batch of slots is free (all of them, when fewer), not on
    /// every slot (batches of one).
    pub(crate) fn slot_freed(&self) {
        let refill_at = (self.cfg.batch_size.max(1) as usize / 2).clamp(1, self.cfg.max_in_flight);
        if self.starved.load(Ordering::SeqCst)
            && self.permits.available_permits() >= refill_at
            && self.starved.swap(false, Ordering::SeqCst)
        {
            self.refill.notify_one();
        }
    }
}

impl Inner {
    /// Waits, `most` at the longest, until no claim is being made.
    pub(crate) async fn claims_made(&self, most: std::time::Duration) {
        let made = self.claimed.notified();
        tokio::pin!(made);
        // Registered before the look, so an end of claiming in between
        // is not missed.
        made.as_mut().enable();
        if self.claiming.load(Ordering::SeqCst) {
            let _ = tokio::time::timeout(most, made).await;
        }
    }

    /// Claiming starts (`true`) or stops.
    pub(crate) fn set_claiming(&self, on: bool) {
        self.claiming.store(on, Ordering::SeqCst);
        if !on {
            self.claimed.notify_waiters();
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
