//! The claim loop: claims due lease events in batches while hook slots are
//! free, and starts one task per claimed event. The store's claim statement
//! decides what is due, including events whose claim expired with a dead
//! owner (rescues); this side only sizes the batches and tracks the claims.
//!
//! The claim statement answers the claimed events' leases as hooks see
//! them; what else hooks need (whole hosts' names and other consumers) is
//! read while the next batches are already being claimed (on other
//! connections), two at once during a burst.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use berth_core::lease::LeaseRecord;
use berth_store::commands::{Claim, Claimed, Finish};
use berth_store::queries::lease_events::NextDue;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinSet;
use tokio::time::Instant;
use uuid::Uuid;

use crate::clock::chrono_of;
use crate::fire::run_event;
use crate::metrics;
use crate::state::{Inner, Running};

/// A claimed batch, each event with its hook slot.
struct Batch {
    claims: Vec<(Claim, OwnedSemaphorePermit)>,
    /// The claims' leases, read by the claim statement.
    leases: Vec<LeaseRecord>,
    /// When the claim was answered, on the local monotonic clock.
    got: Instant,
    /// Whether it was as large as asked (more may be due).
    full: bool,
}

/// When to look next, as the last claim statement answered it: the
/// database's next due time and clock, and when the answer arrived on the
/// local monotonic clock.
pub(crate) type Looked = Option<(NextDue, Instant)>;

/// Claims batches while events are due and hook slots are free; the
/// recorder may wait meanwhile (`Inner::claims_made`). Answers when to look
/// next, if a claim was asked.
pub(crate) async fn claim_due(
    inner: &Arc<Inner>,
    finish_tx: &mpsc::UnboundedSender<Finish>,
    tasks: &mut JoinSet<()>,
) -> Looked {
    inner.set_claiming(true);
    let looked = claim_all(inner, finish_tx, tasks).await;
    inner.set_claiming(false);
    looked
}

/// Claims batches while events are due and hook slots are free: one
/// claim at first, then, while batches come back full (a burst), one per
/// claim lane at once, each on the lane's connection (`SKIP LOCKED` keeps
/// them apart), each round
/// while the hooks' reads of the batches before it are made.
async fn claim_all(inner: &Arc<Inner>, finish_tx: &mpsc::UnboundedSender<Finish>, tasks: &mut JoinSet<()>) -> Looked {
    let mut looked: Looked = None;
    let mut ready: Vec<Batch> = Vec::new();
    let mut lanes = 1;
    loop {
        let sizes = if lanes > 0 { limits(inner, lanes) } else { Vec::new() };
        let leases: Vec<LeaseRecord> = ready.iter_mut().flat_map(|b| std::mem::take(&mut b.leases)).collect();
        let read = async {
            // What else the hooks need (on whole hosts: the hosts' names
            // and other consumers), read once for the batches claimed.
            if ready.is_empty() {
                None
            } else {
                Some(inner.store.hook_contexts_of(leases).await)
            }
        };
        let claims =
            futures::future::join_all(sizes.iter().enumerate().map(|(lane, &limit)| claim_batch(inner, limit, lane)));
        let (contexts, claimed) = tokio::join!(read, claims);
        if let Some(contexts) = contexts {
            let contexts = contexts.map(Arc::new).map_err(|e| e.to_string());
            for batch in ready.drain(..) {
                start(inner, batch, contexts.clone(), finish_tx, tasks);
            }
        }
        // This round's looks are the latest word on when to look next.
        let mut fresh: Looked = None;
        for (batch, look) in claimed {
            fresh = sooner(look, fresh);
            ready.extend(batch);
        }
        looked = fresh.or(looked);
        if ready.is_empty() {
            return looked;
        }
        lanes = if ready.iter().any(|b| b.full) { inner.lanes } else { 0 };
    }
}

/// Of two looks made at once, the one that says to look sooner.
fn sooner(a: Looked, b: Looked) -> Looked {
    let at = |l: &(NextDue, Instant)| l.0.due.unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    match (a, b) {
        (Some(a), Some(b)) => Some(if at(&a) <= at(&b) { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The sizes of the next `lanes` claims, as the free hook slots allow:
/// none when no slot is free (the loop is told when half a batch is free
/// again).
fn limits(inner: &Inner, lanes: usize) -> Vec<i64> {
    let mut free = inner.permits.available_permits() as i64;
    if free == 0 {
        inner.starved.store(true, Ordering::SeqCst);
        // Slots given back since the look above would not wake it.
        inner.slot_freed();
        return Vec::new();
    }
    let mut sizes = Vec::with_capacity(lanes);
    while sizes.len() < lanes && free > 0 {
        let size = inner.cfg.batch_size.min(free);
        sizes.push(size);
        free -= size;
    }
    sizes
}

/// Claims one batch of at most `limit` events (and takes a hook slot for
/// each) on the connection `lane` keeps; `None` when nothing was claimed.
/// With it, when to look next, if the claim was answered.
async fn claim_batch(inner: &Arc<Inner>, limit: i64, lane: usize) -> (Option<Batch>, Looked) {
    // Only this lane's claims use its connection: never waited for.
    let mut kept = inner.kept[lane].lock().await;
    let asked = Instant::now();
    let ttl = chrono_of(inner.cfg.claim_ttl());
    let Claimed { claims, next, leases } =
        match inner.store.claim_lease_events_kept(&mut kept, &inner.id, limit, ttl).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claiming lease events");
                return (None, None);
            }
        };
    let got = Instant::now();
    let looked = Some((next, got));
    if claims.is_empty() {
        return (None, looked);
    }
    metrics::claimed(claims.len());
    let full = claims.len() as i64 >= limit;
    let mut slotted = Vec::with_capacity(claims.len());
    for claim in claims {
        let Ok(permit) = inner.permits.clone().try_acquire_owned() else {
            // Cannot happen (only this loop acquires); the claim expires and is retried.
            tracing::error!(event = %claim.event, "no hook slot for a claimed event");
            continue;
        };
        inner.running.lock().expect("running").insert(
            claim.event,
            Running {
                attempt: claim.attempt,
                expires: asked + inner.cfg.claim_ttl(),
                abort: None,
                recording: false,
                ended: None,
            },
        );
        slotted.push((claim, permit));
    }
    (Some(Batch { claims: slotted, leases, got, full }), looked)
}

/// Starts one task per claimed event of `batch`.
fn start(
    inner: &Arc<Inner>,
    batch: Batch,
    contexts: Result<Arc<std::collections::HashMap<Uuid, berth_store::queries::lease_events::HookContext>>, String>,
    finish_tx: &mpsc::UnboundedSender<Finish>,
    tasks: &mut JoinSet<()>,
) {
    for (claim, permit) in batch.claims {
        let event = claim.event;
        let context = match &contexts {
            Ok(all) => Ok(all.get(&claim.lease).cloned()),
            Err(e) => Err(e.clone()),
        };
        let handle = tasks.spawn(run_event(inner.clone(), claim, batch.got, context, finish_tx.clone(), permit));
        if let Some(r) = inner.running.lock().expect("running").get_mut(&event) {
            r.abort = Some(handle);
        }
    }
}
