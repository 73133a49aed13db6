//! The recorder: one task that writes the outcomes of finished attempts in
//! batches, one transaction each (at most [`RECORD_LANES`] at once), then
//! forgets those events and tells the policy service of the leases that
//! ended.
//!
//! With `record_wait_ms` set, while a burst of due events is being claimed
//! the recorder waits (that long at most) for the claims to be made:
//! recording competes with claiming for the database (an outcome recorded
//! later harms nobody; its claim is renewed meanwhile). Off by default:
//! measured on a 2-core machine, the wait serialised claiming and
//! recording and cost throughput, without a clear gain for bursts.
//!
//! Once a batch is written, the scheduler is woken only if an event is due
//! and unclaimed: one the batch's outcomes freed (a lease's next event, a
//! host's next start), or one a claim skipped. Woken after every batch, at
//! a steady stream of due events it made a claim of nothing per batch,
//! often in flight when the next event fell due.

use std::sync::Arc;
use std::time::Duration;

use berth_app::policy::LeaseValues;
use berth_store::commands::{Finish, Recorded};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::metrics;
use crate::state::Inner;

/// Most finishes recorded in one transaction.
const RECORD_BATCH: usize = 512;

/// Records finishes in batches, in one transaction each.
pub(crate) async fn record_loop(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Finish>) {
    // As many batches recorded at once as claims made (each on its own
    // connection; their events are distinct, and each locks its rows in
    // the one order).
    let lanes = Arc::new(Semaphore::new(inner.lanes));
    let mut writing = JoinSet::new();
    while let Some(first) = rx.recv().await {
        inner.claims_made(inner.cfg.record_wait()).await;
        let Ok(lane) = lanes.clone().acquire_owned().await else { break };
        let mut batch = vec![first];
        while batch.len() < RECORD_BATCH {
            match rx.try_recv() {
                Ok(f) => batch.push(f),
                Err(_) => break,
            }
        }
        while writing.try_join_next().is_some() {}
        let inner = inner.clone();
        writing.spawn(async move {
            write(&inner, &batch).await;
            drop(lane);
        });
    }
    while writing.join_next().await.is_some() {}
}

/// Records one batch, forgets its events and tells the policy service.
async fn write(inner: &Inner, batch: &[Finish]) {
    let recorded = record(inner, batch).await;
    let ended = forget(inner, batch, &recorded);
    if inner.tells_ends && !ended.is_empty() {
        let app = inner.app.clone();
        tokio::spawn(async move {
            for lease in &ended {
                app.leases().ended(lease).await;
            }
        });
    }
    if waiting(inner).await {
        inner.wake.notify_one();
    }
}

/// Whether an event is due and not claimed, asked after the batch's commit
/// (a claim made before it may have skipped an event the batch freed).
/// On an error, yes: a look too many costs a claim.
async fn waiting(inner: &Inner) -> bool {
    inner.store.lease_events_waiting().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "looking for lease events due");
        true
    })
}

/// Writes one batch, retrying while its claims hold; nothing recorded if
/// they have expired by then.
async fn record(inner: &Inner, batch: &[Finish]) -> Vec<Recorded> {
    let mut pause = Duration::from_millis(50);
    let give_up = Instant::now() + inner.cfg.claim_ttl();
    loop {
        match inner.store.finish_lease_events(&inner.id, batch).await {
            Ok(recorded) => {
                metrics::recorded(batch, &recorded);
                for (f, r) in batch.iter().zip(&recorded) {
                    if *r == Recorded::ClaimLost {
                        tracing::warn!(event = %f.event, attempt = f.attempt,
                            "lease event claim lost before its outcome was recorded; another manager has it");
                    }
                }
                return recorded;
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
                return Vec::new();
            }
        }
    }
}

/// Forgets the batch's events; answers the leases whose end was recorded
/// (for the policy service).
fn forget(inner: &Inner, batch: &[Finish], recorded: &[Recorded]) -> Vec<LeaseValues> {
    let mut running = inner.running.lock().expect("running");
    batch
        .iter()
        .zip(recorded.iter().map(Some).chain(std::iter::repeat(None)))
        .filter_map(|(f, r)| {
            let gone = running.remove(&f.event)?;
            (r == Some(&Recorded::Yes)).then_some(gone.ended).flatten()
        })
        .collect()
}
