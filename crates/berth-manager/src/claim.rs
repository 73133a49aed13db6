//! The claim loop: claims due lease events in batches while hook slots are
//! free, and starts one task per claimed event. The store's claim statement
//! decides what is due, including events whose claim expired with a dead
//! owner (rescues); this side only sizes the batches and tracks the claims.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use berth_store::commands::Finish;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use uuid::Uuid;

use crate::clock::chrono_of;
use crate::fire::run_event;
use crate::metrics;
use crate::state::{Inner, Running};

/// Claims batches while events are due and hook slots are free.
pub(crate) async fn claim_due(inner: &Arc<Inner>, finish_tx: &mpsc::UnboundedSender<Finish>, tasks: &mut JoinSet<()>) {
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
