//! Retries: what a failed attempt makes of its lease event (retried later,
//! by any manager, or failed for good) and how long it waits first.

use std::time::Duration;

use backon::BackoffBuilder;
use berth_store::commands::Outcome;

use crate::config::ManagerConfig;

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

/// The outcome of attempt number `attempt` whose hooks answered `errors`
/// (`permanent`: the first that must not be retried). A permanent failure
/// fails the event; others retry it until the configured attempts are spent.
pub(crate) fn outcome(cfg: &ManagerConfig, attempt: i32, permanent: Option<String>, errors: &[String]) -> Outcome {
    if let Some(p) = permanent {
        Outcome::Failed { error: if errors.len() > 1 { errors.join("; ") } else { p } }
    } else if !errors.is_empty() {
        let error = errors.join("; ");
        if attempt >= cfg.max_attempts {
            Outcome::Failed { error: format!("{error} (gave up after {attempt} attempts)") }
        } else {
            Outcome::Retry { error, retry_in: retry_delay(cfg, attempt) }
        }
    } else {
        Outcome::Done
    }
}

/// The outcome of attempt number `attempt` that could not run its hooks:
/// retried, until the configured attempts are spent.
pub(crate) fn not_run(cfg: &ManagerConfig, attempt: i32, error: String) -> Outcome {
    if attempt >= cfg.max_attempts {
        Outcome::Failed { error }
    } else {
        Outcome::Retry { error, retry_in: retry_delay(cfg, attempt) }
    }
}
