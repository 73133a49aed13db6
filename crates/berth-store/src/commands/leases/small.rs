//! Whether the cloud is small enough for a new lease to read every host
//! rather than the hosts near its window (`queries::near`). On a small
//! cloud the near read finds most hosts anyway, and it costs two round
//! trips and a statement planned afresh, where every candidate is read in
//! the round trip that begins the transaction: at 100 hosts with a
//! booked calendar a creation took twice as long through the near read.
//!
//! Each creation that may read near counts the hosts, up to one more than
//! [`SMALL`], in its first round trip (a bounded scan, whatever the
//! cloud's size), and the next creation follows what it saw. The count only
//! picks which read decides: both decide alike, so a count gone stale (a
//! cloud grown or shrunk since) costs time, never a worse choice.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::Row;

/// Hosts at most for a cloud read whole, unless the store says otherwise
/// (`Store::with_small_cloud`): where the near read, which reads some
/// hundred hosts, stops reading fewer than every candidate.
pub(crate) const SMALL: usize = 300;

/// The hosts enrolled, counted up to `$1`.
pub(super) const HOSTS_UP_TO: &str = "SELECT count(*) AS hosts FROM (SELECT 1 FROM hosts LIMIT $1) h";

/// How many hosts make a small cloud, and what the last count saw (not
/// small until one has been made).
#[derive(Debug)]
pub(crate) struct SmallCloud {
    up_to: i64,
    small: AtomicBool,
}

impl SmallCloud {
    /// A cloud of at most `hosts` hosts is small.
    pub(crate) fn new(hosts: usize) -> SmallCloud {
        SmallCloud { up_to: i64::try_from(hosts).unwrap_or(i64::MAX), small: AtomicBool::new(false) }
    }

    /// Hosts at most in a small cloud.
    pub(crate) fn hosts(&self) -> usize {
        usize::try_from(self.up_to).unwrap_or(usize::MAX)
    }

    /// Whether the last count found a small cloud.
    pub(super) fn is_small(&self) -> bool {
        self.small.load(Ordering::Relaxed)
    }

    /// [`HOSTS_UP_TO`]'s bound: one host more than a small cloud has.
    pub(super) fn count_to(&self) -> i64 {
        self.up_to.saturating_add(1)
    }

    /// Keeps what [`HOSTS_UP_TO`] answered.
    pub(super) fn saw(&self, rows: &[Row]) {
        if let Some(n) = rows.first().map(|r| r.get::<_, i64>("hosts")) {
            self.small.store(n <= self.up_to, Ordering::Relaxed);
        }
    }
}

impl Default for SmallCloud {
    fn default() -> SmallCloud {
        SmallCloud::new(SMALL)
    }
}

/// Whether the cloud has more than `small` hosts, counted now (a bounded
/// count): a heal decides so whether to read near each window.
pub(super) async fn past(tx: &impl crate::client::GenericClient, small: usize) -> Result<bool, crate::StoreError> {
    let up_to = i64::try_from(small).unwrap_or(i64::MAX).saturating_add(1);
    let n: i64 = tx.query_one(HOSTS_UP_TO, &[&up_to]).await?.get("hosts");
    Ok(n >= up_to)
}
