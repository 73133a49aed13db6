//! Firing one claimed lease event: its hooks, the outcome they make, and
//! that outcome handed to the recorder. Runs as its own task, outside any
//! transaction, holding one hook slot.

use std::sync::Arc;

use berth_core::lease::LeaseEventType;
use berth_store::commands::{Claim, Finish, Outcome};
use berth_store::queries::lease_events::HookContext;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::time::Instant;

use crate::clock::chrono_of;
use crate::state::Inner;
use crate::{hooks, metrics, retry};

/// One attempt at a claimed event (claimed at `got` on the local monotonic
/// clock), then its outcome to the recorder.
pub(crate) async fn run_event(
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
        Ok(Some(ctx)) => run_hooks(&inner, &claim, &ctx).await,
        Ok(None) => {
            // The lease was deleted: its events went with it.
            inner.running.lock().expect("running").remove(&claim.event);
            return;
        }
        Err(e) => {
            let outcome = retry::not_run(&inner.cfg, claim.attempt, format!("reading the lease: {e}"));
            Finish { lease: claim.lease, event: claim.event, attempt: claim.attempt, outcome, hooks: Vec::new() }
        }
    };
    log_outcome(&claim, &finish.outcome);
    if let Some(r) = inner.running.lock().expect("running").get_mut(&claim.event) {
        r.recording = true;
    }
    let _ = finish_tx.send(finish);
    drop(permit);
    inner.slot_freed();
}

/// Runs the event's hooks and decides its outcome; an end event done keeps
/// the lease for the policy service, told once the outcome is recorded.
async fn run_hooks(inner: &Inner, claim: &Claim, ctx: &HookContext) -> Finish {
    let hooks::Attempt { hooks, permanent, errors } = hooks::attempt(&inner.registry, claim, ctx).await;
    let outcome = retry::outcome(&inner.cfg, claim.attempt, permanent, &errors);
    if outcome == Outcome::Done && claim.event_type == LeaseEventType::EndLease && inner.tells_ends {
        if let Some(r) = inner.running.lock().expect("running").get_mut(&claim.event) {
            r.ended = Some(berth_app::policy::values_of(&ctx.lease));
        }
    }
    Finish { lease: claim.lease, event: claim.event, attempt: claim.attempt, outcome, hooks }
}

fn log_outcome(claim: &Claim, outcome: &Outcome) {
    match outcome {
        Outcome::Done => tracing::debug!(event = %claim.event, lease = %claim.lease, kind = claim.event_type.as_str(),
            attempt = claim.attempt, "lease event done"),
        Outcome::Retry { error, retry_in } => tracing::info!(event = %claim.event, lease = %claim.lease,
            kind = claim.event_type.as_str(), attempt = claim.attempt, ?retry_in, error = %error, "lease event will be retried"),
        Outcome::Failed { error } => tracing::warn!(event = %claim.event, lease = %claim.lease,
            kind = claim.event_type.as_str(), attempt = claim.attempt, error = %error, "lease event failed"),
    }
}
