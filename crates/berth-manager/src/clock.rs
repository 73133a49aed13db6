//! The clock anchor: due times are the database's, sleeps are on the local
//! monotonic clock. An anchor pairs one reading of each so that a due time
//! becomes an instant to sleep until, whatever this host's wall clock says.

use std::time::Duration;

use berth_store::queries::lease_events::NextDue;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// A local duration as chrono's (durations sent to the database).
pub(crate) fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The database's time at one instant of the local monotonic clock: turns
/// due times (database time) into instants to sleep until.
#[derive(Clone, Copy)]
pub(crate) struct Anchor {
    database: DateTime<Utc>,
    local: Instant,
}

impl Anchor {
    /// Taken when the database's answer arrived: the database read its
    /// clock before that, so instants computed from it are never early.
    pub(crate) fn of(next: &NextDue) -> Anchor {
        Anchor::at(next, Instant::now())
    }

    /// As [`Anchor::of`], for an answer that arrived at `local`.
    pub(crate) fn at(next: &NextDue, local: Instant) -> Anchor {
        Anchor { database: next.now, local }
    }

    pub(crate) fn instant_of(&self, t: DateTime<Utc>) -> Instant {
        self.local + (t - self.database).to_std().unwrap_or(Duration::ZERO)
    }
}

/// How much before a due instant tokio's timer is asked to wake: it fires
/// on a millisecond tick, after its deadline's tick has begun, and the
/// runtime's poll for I/O rounds its wait up to a millisecond too; so far
/// before, it wakes before the instant.
const COARSE_MARGIN: Duration = Duration::from_millis(2);

/// Sleeps until `at`, waking within tens of microseconds of it rather than
/// on tokio's next millisecond tick (on average half a millisecond, at
/// worst two, late): the timer for all but the last [`COARSE_MARGIN`],
/// then a thread's sleep (the kernel's, to its timer slack) for the rest,
/// off the runtime's threads. Dropped in that last part, the thread still
/// sleeps its end out and nothing else happens.
pub(crate) async fn sleep_until_precise(at: Instant) {
    if let Some(coarse) = at.checked_sub(COARSE_MARGIN) {
        tokio::time::sleep_until(coarse).await;
    }
    let left = at.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Never wakes before its instant, whether that is past, within the
    /// timer's margin or beyond it.
    #[tokio::test]
    async fn a_precise_sleep_never_wakes_early() {
        for us in [0u64, 300, 1_500, 2_000, 2_700, 6_100] {
            let at = Instant::now() + Duration::from_micros(us);
            sleep_until_precise(at).await;
            assert!(Instant::now() >= at, "woke before an instant {us} µs ahead");
        }
        let past = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        sleep_until_precise(past).await;
    }
}
