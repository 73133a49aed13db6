//! The claim loop: claims due lease events in batches while hook slots are
//! free, and starts one task per claimed event. The store's claim statement
//! decides what is due, including events whose claim expired with a dead
//! owner (rescues); this side only sizes the batches and tracks the claims.
//!
//! While one batch's leases are read for its hooks, the next batch is
//! already being claimed (on another connection): a burst of due events
//! waits for one claim per batch, not a claim and a read.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use berth_store::commands::{Claim, Finish};
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
/// recorder waits meanwhile (`Inner::claims_made`). Answers when to look
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

/// Claims batches while events are due and hook slots are free.
async fn claim_all(inner: &Arc<Inner>, finish_tx: &mpsc::UnboundedSender<Finish>, tasks: &mut JoinSet<()>) -> Looked {
    let (first, mut looked) = claim_batch(inner).await;
    let Some(mut batch) = first else {
        return looked;
    };
    loop {
        let leases: Vec<Uuid> = batch.claims.iter().map(|(c, _)| c.lease).collect();
        // What the hooks need, read once for the whole batch, while the
        // next batch is claimed.
        let (contexts, (next, again)) = if batch.full {
            tokio::join!(inner.store.hook_contexts(&leases), claim_batch(inner))
        } else {
            (inner.store.hook_contexts(&leases).await, (None, None))
        };
        looked = again.or(looked);
        start(inner, batch, contexts.map(Arc::new).map_err(|e| e.to_string()), finish_tx, tasks);
        match next {
            Some(b) => batch = b,
            None => return looked,
        }
    }
}

/// Claims one batch as large as the free hook slots allow (and takes a
/// slot for each event); `None` when nothing was claimed. With it, when to
/// look next, if a claim was asked.
async fn claim_batch(inner: &Arc<Inner>) -> (Option<Batch>, Looked) {
    let free = inner.permits.available_permits();
    if free == 0 {
        inner.starved.store(true, Ordering::SeqCst);
        // Slots given back since the look above would not wake it.
        inner.slot_freed();
        return (None, None);
    }
    let limit = inner.cfg.batch_size.min(free as i64);
    let asked = Instant::now();
    let (claims, next) =
        match inner.store.claim_lease_events_then_next(&inner.id, limit, chrono_of(inner.cfg.claim_ttl())).await {
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
            Running { attempt: claim.attempt, expires: asked + inner.cfg.claim_ttl(), abort: None, ended: None },
        );
        slotted.push((claim, permit));
    }
    (Some(Batch { claims: slotted, got, full }), looked)
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
