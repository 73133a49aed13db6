//! The manager's metrics (exported by berthd's `/metrics`).

use berth_store::commands::{Claim, Finish, Outcome, Recorded};
use chrono::{DateTime, Utc};

pub const DUE: &str = "berth_manager_events_due";
/// 1 while an operator has paused the managers (every replica), else 0.
pub const PAUSED: &str = "berth_manager_paused";
pub const CLAIMED: &str = "berth_manager_events_claimed_total";
pub const DONE: &str = "berth_manager_events_done_total";
pub const FAILED: &str = "berth_manager_events_failed_total";
pub const RETRIES: &str = "berth_manager_retries_total";
pub const RESCUES: &str = "berth_manager_claim_rescues_total";
pub const CLAIMS_LOST: &str = "berth_manager_claims_lost_total";
/// Seconds from an event's due time to its hook starting.
pub const LAG: &str = "berth_manager_lag_seconds";
/// Buckets for [`LAG`], in seconds.
pub const LAG_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Capacity lent to preemptible consumers now, by resource class.
pub const LENT: &str = "berth_capacity_lent";
/// Capacity reclaimed from preemptible consumers, by resource class.
pub const RECLAIMED: &str = "berth_capacity_reclaimed_total";
/// Reclaims made, by outcome (`done`, `failed`, `retrying`).
pub const RECLAIMS: &str = "berth_reclaims_total";
/// Seconds from a loan's reclaim falling due to its outcome recorded.
pub const RECLAIM_LAG: &str = "berth_reclaim_lag_seconds";

/// Describes every metric (for the exporter's HELP lines) and creates it.
pub fn describe() {
    metrics::describe_gauge!(DUE, "Lease events due and not yet claimed");
    metrics::describe_gauge!(PAUSED, "1 while an operator has paused the managers, else 0");
    metrics::describe_counter!(CLAIMED, "Lease events claimed (each attempt)");
    metrics::describe_counter!(DONE, "Lease events done");
    metrics::describe_counter!(FAILED, "Lease events that ended ERROR");
    metrics::describe_counter!(RETRIES, "Failed attempts that will be retried");
    metrics::describe_counter!(RESCUES, "Expired claims taken back from another manager");
    metrics::describe_counter!(CLAIMS_LOST, "Claims lost to another manager before the outcome was recorded");
    metrics::describe_histogram!(LAG, metrics::Unit::Seconds, "From a lease event's due time to its hook starting");
    // Created at zero, so that a scrape before the first event shows them.
    metrics::gauge!(DUE).set(0.0);
    metrics::gauge!(PAUSED).set(0.0);
    for name in [CLAIMED, DONE, FAILED, RETRIES, RESCUES, CLAIMS_LOST] {
        let _ = metrics::counter!(name);
    }
    let _ = metrics::histogram!(LAG);
    metrics::describe_counter!(RECLAIMED, "Capacity reclaimed from preemptible consumers, by resource class");
    metrics::describe_counter!(RECLAIMS, "Reclaims of lent capacity through the plugins, by outcome");
    metrics::describe_histogram!(
        RECLAIM_LAG,
        metrics::Unit::Seconds,
        "From a loan's reclaim falling due to its outcome recorded"
    );
    metrics::describe_gauge!(LENT, "Capacity lent to preemptible consumers now, by resource class");
    for class in STANDARD_CLASSES {
        metrics::gauge!(LENT, "resource_class" => class).set(0.0);
        let _ = metrics::counter!(RECLAIMED, "resource_class" => class);
    }
    for outcome in ["done", "failed", "retrying"] {
        let _ = metrics::counter!(RECLAIMS, "outcome" => outcome);
    }
    let _ = metrics::histogram!(RECLAIM_LAG);
}

/// The classes whose lending series exist from the start.
const STANDARD_CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];

/// What is lent now, per class (a class lent before and no longer is 0).
pub(crate) fn lent(now: &[(String, i64)]) {
    for class in STANDARD_CLASSES {
        if !now.iter().any(|(c, _)| c == class) {
            metrics::gauge!(LENT, "resource_class" => class).set(0.0);
        }
    }
    for (class, used) in now {
        metrics::gauge!(LENT, "resource_class" => class.clone()).set(*used as f64);
    }
}

/// A reclaim's outcome recorded, `lag` seconds after it fell due.
pub(crate) fn reclaimed(done: bool, lag: f64, holds: &[(uuid::Uuid, String, String, i64)]) {
    metrics::counter!(RECLAIMS, "outcome" => if done { "done" } else { "failed" }).increment(1);
    metrics::histogram!(RECLAIM_LAG).record(lag.max(0.0));
    if done {
        for (_, _, class, used) in holds {
            metrics::counter!(RECLAIMED, "resource_class" => class.clone())
                .increment(u64::try_from(*used).unwrap_or(0));
        }
    }
}

/// A reclaim failed in a way that may pass; it is tried again.
pub(crate) fn reclaim_retrying() {
    metrics::counter!(RECLAIMS, "outcome" => "retrying").increment(1);
}

pub(crate) fn claimed(n: usize) {
    metrics::counter!(CLAIMED).increment(n as u64);
}

pub(crate) fn started(claim: &Claim, at: DateTime<Utc>) {
    let lag = (at - claim.due).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6;
    metrics::histogram!(LAG).record(lag);
    if claim.rescued_from.is_some() {
        metrics::counter!(RESCUES).increment(1);
    }
}

pub(crate) fn recorded(batch: &[Finish], recorded: &[Recorded]) {
    for (f, r) in batch.iter().zip(recorded) {
        if *r != Recorded::Yes {
            metrics::counter!(CLAIMS_LOST).increment(1);
            continue;
        }
        match f.outcome {
            Outcome::Done => metrics::counter!(DONE).increment(1),
            Outcome::Retry { .. } => metrics::counter!(RETRIES).increment(1),
            Outcome::Failed { .. } => metrics::counter!(FAILED).increment(1),
        }
    }
}

pub(crate) fn claim_lost() {
    metrics::counter!(CLAIMS_LOST).increment(1);
}

pub(crate) fn due(n: i64, paused: bool) {
    metrics::gauge!(DUE).set(n as f64);
    metrics::gauge!(PAUSED).set(if paused { 1.0 } else { 0.0 });
}
