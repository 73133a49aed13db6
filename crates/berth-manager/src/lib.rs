//! berth-manager: fires every lease event on time.
//!
//! Claims due lease events in one statement (`FOR UPDATE SKIP LOCKED`) with a
//! claim expiry it renews while a plugin hook runs, records each outcome as
//! log events, and rescues claims whose owner died. It knows no HTTP and
//! writes no SQL of its own: it calls berth-store and berth-plugins.
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

pub mod config;
pub mod hooks;
pub mod metrics;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::BackoffBuilder;
use berth_core::lease::LeaseEventType;
use berth_plugins::policy::LeaseValues;
use berth_plugins::{Hook, Policy, Registry};
use berth_store::commands::{Claim, Finish, Outcome, Recorded};
use berth_store::notify::{Notification, LEASE_EVENTS};
use berth_store::queries::lease_events::{HookContext, NextDue};
use berth_store::Store;
use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;
use uuid::Uuid;

pub use config::ManagerConfig;

/// Most finishes recorded in one transaction.
const RECORD_BATCH: usize = 512;

/// A claimed event being worked on in this berthd.
struct Running {
    attempt: i32,
    /// When the claim expires at the latest, on the local monotonic clock
    /// (counted from before the claim was asked for, so never later than
    /// the database's expiry).
    expires: Instant,
    abort: Option<AbortHandle>,
    /// An end event whose hooks all succeeded: the lease the policy service
    /// is told of once the outcome is recorded.
    ended: Option<LeaseValues>,
}

struct Inner {
    store: Store,
    registry: Arc<Registry>,
    /// Told when a lease ends (its end event done).
    policy: Option<Arc<Policy>>,
    cfg: ManagerConfig,
    id: String,
    /// Wakes the scheduler: something finished, or hook slots freed up.
    wake: Notify,
    /// The scheduler stopped claiming for lack of hook slots.
    starved: AtomicBool,
    permits: Arc<Semaphore>,
    running: Mutex<HashMap<Uuid, Running>>,
    sweeping: AtomicBool,
}

/// The manager of one berthd. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
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

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The database's time at one instant of the local monotonic clock: turns
/// due times (database time) into instants to sleep until.
#[derive(Clone, Copy)]
struct Anchor {
    database: DateTime<Utc>,
    local: Instant,
}

impl Anchor {
    /// Taken when the database's answer arrived: the database read its
    /// clock before that, so instants computed from it are never early.
    fn of(next: &NextDue) -> Anchor {
        Anchor { database: next.now, local: Instant::now() }
    }

    fn instant_of(&self, t: DateTime<Utc>) -> Instant {
        self.local + (t - self.database).to_std().unwrap_or(Duration::ZERO)
    }
}

impl Manager {
    pub fn new(store: Store, registry: Arc<Registry>, cfg: ManagerConfig) -> Manager {
        let id = cfg.id.clone().unwrap_or_else(default_id);
        let permits = Arc::new(Semaphore::new(cfg.max_in_flight));
        Manager {
            inner: Arc::new(Inner {
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
            }),
        }
    }

    /// Tells `policy` (its external service's `on-end`) of every lease
    /// whose end event this manager finishes. Before the manager runs.
    pub fn with_policy(mut self, policy: Arc<Policy>) -> Manager {
        Arc::get_mut(&mut self.inner).expect("set before the manager is shared").policy = Some(policy);
        self
    }

    /// The name this manager claims under.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Runs until `shutdown` completes, then stops claiming, gives running
    /// hooks the configured grace to finish and records what they did.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let inner = self.inner;
        tracing::info!(manager = %inner.id, "manager running");
        let (finish_tx, finish_rx) = mpsc::unbounded_channel::<Finish>();
        let recorder = tokio::spawn(record_loop(inner.clone(), finish_rx));
        let renewer = tokio::spawn(renew_loop(inner.clone()));
        let mut notes = inner.store.listen(LEASE_EVENTS);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let poll = inner.cfg.poll_interval();
        let debounce = inner.cfg.debounce();
        let mut next = Instant::now();
        let mut next_sweep = Instant::now();
        let mut anchor: Option<Anchor> = None;
        tokio::pin!(shutdown);
        loop {
            while tasks.try_join_next().is_some() {}
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                note = notes.recv() => {
                    match note {
                        Some(Notification::Payload(p)) => {
                            let due = p.parse::<i64>().ok().and_then(DateTime::<Utc>::from_timestamp_micros);
                            // Without an anchor yet, look now (the database decides what is due).
                            let at = match (due, anchor) {
                                (Some(due), Some(a)) => a.instant_of(due),
                                _ => Instant::now(),
                            };
                            next = next.min(at.max(Instant::now() + debounce));
                        }
                        Some(Notification::Connected) => next = next.min(Instant::now() + debounce),
                        // The listener is gone for good; polling still works.
                        None => notes = mpsc::channel(1).1,
                    }
                    continue;
                }
                _ = inner.wake.notified() => {
                    next = next.min(Instant::now() + debounce);
                    continue;
                }
                _ = tokio::time::sleep_until(next) => {}
            }
            claim_due(&inner, &finish_tx, &mut tasks).await;
            if Instant::now() >= next_sweep {
                next_sweep = Instant::now() + poll;
                sweep(&inner);
            }
            next = Instant::now() + poll;
            match inner.store.next_lease_event_due().await {
                Ok(due) => {
                    let a = Anchor::of(&due);
                    if let Some(t) = due.due {
                        next = next.min(a.instant_of(t));
                    }
                    anchor = Some(a);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the next due time");
                    next = next.min(Instant::now() + Duration::from_secs(1));
                }
            }
        }
        tracing::info!(manager = %inner.id, running = tasks.len(), "manager stopping");
        let grace = tokio::time::sleep(Duration::from_millis(inner.cfg.shutdown_grace_ms));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                r = tasks.join_next() => if r.is_none() { break },
                _ = &mut grace => {
                    tracing::warn!(abandoned = tasks.len(), "hooks still running at shutdown; their claims will expire");
                    tasks.abort_all();
                    break;
                }
            }
        }
        drop(finish_tx);
        renewer.abort();
        let _ = recorder.await;
        tracing::info!(manager = %inner.id, "manager stopped");
    }
}

/// Claims batches while events are due and hook slots are free.
async fn claim_due(inner: &Arc<Inner>, finish_tx: &mpsc::UnboundedSender<Finish>, tasks: &mut JoinSet<()>) {
    loop {
        let free = inner.permits.available_permits();
        if free == 0 {
            inner.starved.store(true, Ordering::SeqCst);
            return;
        }
        let limit = inner.cfg.batch_size.min(free as i64);
        let asked = Instant::now();
        let claims = match inner.store.claim_lease_events(&inner.id, limit, chrono_of(inner.cfg.claim_ttl())).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claiming lease events");
                return;
            }
        };
        let got = Instant::now();
        let n = claims.len() as i64;
        if n == 0 {
            return;
        }
        metrics::claimed(claims.len());
        // What the hooks need, read once for the whole batch.
        let leases: Vec<Uuid> = claims.iter().map(|c| c.lease).collect();
        let contexts = inner.store.hook_contexts(&leases).await.map(Arc::new).map_err(|e| e.to_string());
        for claim in claims {
            let Ok(permit) = inner.permits.clone().try_acquire_owned() else {
                // Cannot happen (only this loop acquires); the claim expires and is retried.
                tracing::error!(event = %claim.event, "no hook slot for a claimed event");
                continue;
            };
            inner.running.lock().expect("running").insert(
                claim.event,
                Running { attempt: claim.attempt, expires: asked + inner.cfg.claim_ttl(), abort: None, ended: None },
            );
            let event = claim.event;
            let context = match &contexts {
                Ok(all) => Ok(all.get(&claim.lease).cloned()),
                Err(e) => Err(e.clone()),
            };
            let handle = tasks.spawn(run_event(inner.clone(), claim, got, context, finish_tx.clone(), permit));
            if let Some(r) = inner.running.lock().expect("running").get_mut(&event) {
                r.abort = Some(handle);
            }
        }
        if n < limit {
            return;
        }
    }
}

/// The pause before attempt `attempt + 1`: exponential from
/// `retry_min_ms`, with jitter, at most about `retry_max_ms`.
pub fn retry_delay(cfg: &ManagerConfig, attempt: i32) -> Duration {
    let n = attempt.max(1) as usize;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(cfg.retry_min_ms))
        .with_max_delay(Duration::from_millis(cfg.retry_max_ms))
        .with_factor(2.0)
        .with_jitter()
        .with_max_times(n)
        .build()
        .nth(n - 1)
        .unwrap_or(Duration::from_millis(cfg.retry_max_ms))
}

/// One attempt at a claimed event (claimed at `got` on the local monotonic
/// clock), then its outcome to the recorder.
async fn run_event(
    inner: Arc<Inner>,
    claim: Claim,
    got: Instant,
    context: Result<Option<HookContext>, String>,
    finish_tx: mpsc::UnboundedSender<Finish>,
    permit: OwnedSemaphorePermit,
) {
    // The database's time now, as the claim's plus what passed since.
    let started = claim.claimed_at + chrono_of(got.elapsed());
    metrics::started(&claim, started);
    if let Some(from) = &claim.rescued_from {
        tracing::warn!(event = %claim.event, lease = %claim.lease, from = %from, attempt = claim.attempt,
            "took back a lease event whose claim expired");
    }
    let finish = match context {
        Ok(Some(ctx)) => {
            let attempt = hooks::attempt(&inner.registry, &claim, &ctx).await;
            let outcome = if let Some(p) = attempt.permanent {
                Outcome::Failed { error: if attempt.errors.len() > 1 { attempt.errors.join("; ") } else { p } }
            } else if !attempt.errors.is_empty() {
                let error = attempt.errors.join("; ");
                if claim.attempt >= inner.cfg.max_attempts {
                    Outcome::Failed { error: format!("{error} (gave up after {} attempts)", claim.attempt) }
                } else {
                    Outcome::Retry { error, retry_in: retry_delay(&inner.cfg, claim.attempt) }
                }
            } else {
                Outcome::Done
            };
            if outcome == Outcome::Done && claim.event_type == LeaseEventType::EndLease && inner.policy.is_some() {
                if let Some(r) = inner.running.lock().expect("running").get_mut(&claim.event) {
                    r.ended = Some(lease_values(&ctx));
                }
            }
            Finish { lease: claim.lease, event: claim.event, attempt: claim.attempt, outcome, hooks: attempt.hooks }
        }
        Ok(None) => {
            // The lease was deleted: its events went with it.
            inner.running.lock().expect("running").remove(&claim.event);
            return;
        }
        Err(e) => {
            let error = format!("reading the lease: {e}");
            let outcome = if claim.attempt >= inner.cfg.max_attempts {
                Outcome::Failed { error }
            } else {
                Outcome::Retry { error, retry_in: retry_delay(&inner.cfg, claim.attempt) }
            };
            Finish { lease: claim.lease, event: claim.event, attempt: claim.attempt, outcome, hooks: Vec::new() }
        }
    };
    match &finish.outcome {
        Outcome::Done => tracing::debug!(event = %claim.event, lease = %claim.lease, kind = claim.event_type.as_str(),
            attempt = claim.attempt, "lease event done"),
        Outcome::Retry { error, retry_in } => tracing::info!(event = %claim.event, lease = %claim.lease,
            kind = claim.event_type.as_str(), attempt = claim.attempt, ?retry_in, error = %error, "lease event will be retried"),
        Outcome::Failed { error } => tracing::warn!(event = %claim.event, lease = %claim.lease,
            kind = claim.event_type.as_str(), attempt = claim.attempt, error = %error, "lease event failed"),
    }
    let _ = finish_tx.send(finish);
    drop(permit);
    if inner.starved.swap(false, Ordering::SeqCst) {
        inner.wake.notify_one();
    }
}

/// The lease as the policy service is told of it.
fn lease_values(ctx: &HookContext) -> LeaseValues {
    let r = &ctx.lease.record;
    let reservations = r.reservations.iter().map(|x| (x.resource_type.as_str(), &x.params));
    LeaseValues::of_record(&r.name, &r.project_id, &r.user_id, (r.start, r.end), reservations)
}

/// Records finishes in batches, in one transaction each.
async fn record_loop(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Finish>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < RECORD_BATCH {
            match rx.try_recv() {
                Ok(f) => batch.push(f),
                Err(_) => break,
            }
        }
        let mut pause = Duration::from_millis(50);
        let give_up = Instant::now() + inner.cfg.claim_ttl();
        let recorded: Vec<Recorded> = loop {
            match inner.store.finish_lease_events(&inner.id, &batch).await {
                Ok(recorded) => {
                    metrics::recorded(&batch, &recorded);
                    for (f, r) in batch.iter().zip(&recorded) {
                        if *r == Recorded::ClaimLost {
                            tracing::warn!(event = %f.event, attempt = f.attempt,
                                "lease event claim lost before its outcome was recorded; another manager has it");
                        }
                    }
                    break recorded;
                }
                Err(e) if Instant::now() < give_up => {
                    tracing::warn!(error = %e, ?pause, "recording lease event outcomes; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    // The claims have expired by now: another manager (or
                    // this one) takes the events back and runs them again.
                    tracing::error!(error = %e, events = batch.len(), "could not record lease event outcomes");
                    break Vec::new();
                }
            }
        };
        let ended: Vec<LeaseValues> = {
            let mut running = inner.running.lock().expect("running");
            batch
                .iter()
                .zip(recorded.iter().map(Some).chain(std::iter::repeat(None)))
                .filter_map(|(f, r)| {
                    let gone = running.remove(&f.event)?;
                    (r == Some(&Recorded::Yes)).then_some(gone.ended).flatten()
                })
                .collect()
        };
        if let (Some(policy), false) = (&inner.policy, ended.is_empty()) {
            let policy = policy.clone();
            tokio::spawn(async move {
                for lease in &ended {
                    policy.on_end(lease).await;
                }
            });
        }
        inner.wake.notify_one();
    }
}

/// Renews the claims of running events before they expire; aborts the work
/// on events whose claim another manager has taken back.
async fn renew_loop(inner: Arc<Inner>) {
    let ttl = inner.cfg.claim_ttl();
    loop {
        tokio::time::sleep(ttl / 4).await;
        let horizon = Instant::now() + ttl / 2;
        let due: Vec<(Uuid, i32)> = inner
            .running
            .lock()
            .expect("running")
            .iter()
            .filter(|(_, r)| r.expires < horizon)
            .map(|(id, r)| (*id, r.attempt))
            .collect();
        if due.is_empty() {
            continue;
        }
        let asked = Instant::now();
        match inner.store.renew_claims(&inner.id, &due, chrono_of(ttl)).await {
            Ok(kept) => {
                let expires = asked + ttl;
                let mut running = inner.running.lock().expect("running");
                for (id, _) in &due {
                    if kept.contains(id) {
                        if let Some(r) = running.get_mut(id) {
                            r.expires = expires;
                        }
                    } else if let Some(r) = running.remove(id) {
                        metrics::claim_lost();
                        tracing::warn!(event = %id, "claim taken back by another manager; abandoning the hook");
                        if let Some(a) = r.abort {
                            a.abort();
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing claims"),
        }
    }
}

/// Periodic chores, in the background: the gauge of due events, and hosts
/// held back at a lease's end whose time to return has come.
fn sweep(inner: &Arc<Inner>) {
    if inner.sweeping.swap(true, Ordering::SeqCst) {
        return;
    }
    let inner = inner.clone();
    tokio::spawn(async move {
        if let Ok(n) = inner.store.lease_events_due().await {
            metrics::due(n);
        }
        match inner.store.held_hosts_due().await {
            Ok(held) => {
                for h in held {
                    return_host(&inner, h).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading held hosts"),
        }
        inner.sweeping.store(false, Ordering::SeqCst);
    });
}

/// A recycled host due back: the host plugin acts (deletes whoever is still
/// on it), then the host goes back to the free pool.
async fn return_host(inner: &Inner, h: berth_store::commands::HeldHost) {
    let Ok(plugin) = inner.registry.get(berth_plugins::host::RESOURCE_TYPE) else {
        return;
    };
    let hook = Hook {
        event_type: "return_hosts".into(),
        idempotency_key: format!("return:{}:{}", h.lease, h.provider),
        attempt: 1,
        lease: serde_json::json!({"id": h.lease}),
        reservation: serde_json::json!({"resource_type": berth_plugins::host::RESOURCE_TYPE}),
        allocations: vec![serde_json::json!({
            "resource_provider": {"uuid": h.provider, "name": h.name},
            "other_consumers": h.others.iter().map(|c| serde_json::json!({"consumer_id": c})).collect::<Vec<_>>(),
        })],
    };
    match plugin.on_return(&hook).await {
        Ok(outcome) => {
            match inner.store.return_held_host(&format!("manager:{}", inner.id), h.provider, &outcome.effects).await {
                Ok(true) => tracing::info!(host = %h.name, "recycled host back in the free pool"),
                Ok(false) => {}
                Err(e) => tracing::warn!(host = %h.name, error = %e, "returning a recycled host"),
            }
        }
        Err(e) => tracing::warn!(host = %h.name, error = %e.message, "returning a recycled host; will try again"),
    }
}
