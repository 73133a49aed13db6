//! Running a command: one transaction at READ COMMITTED, retried from a clean
//! transaction when the database says a concurrent writer got in the way.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use berth_core::Error;
use tokio_postgres::Transaction;

use crate::{Store, StoreError};

/// How many times a command starts over before it answers with a conflict.
const MAX_RETRIES: usize = 8;

impl Store {
    /// Runs `body` in a fresh READ COMMITTED transaction and commits. On a
    /// transient failure (deadlock, serialization failure, lost insert race)
    /// the whole transaction is rolled back and `body` runs again from the
    /// start, after a jittered exponential pause, so no decision ever rests
    /// on a read from a failed attempt.
    pub(crate) async fn command<T>(
        &self,
        mut body: impl AsyncFnMut(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, Error> {
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(2))
            .with_max_delay(Duration::from_millis(200))
            .with_max_times(MAX_RETRIES)
            .with_jitter()
            .build();
        let mut client = self.client().await?;
        loop {
            let attempt: Result<T, StoreError> = async {
                let tx = client.transaction().await?;
                let out = body(&tx).await?;
                tx.commit().await?;
                Ok(out)
            }
            .await;
            match attempt {
                Ok(out) => return Ok(out),
                Err(e) if e.is_transient() => match backoff.next() {
                    Some(pause) => {
                        tracing::debug!(error = %e, ?pause, "command retried");
                        tokio::time::sleep(pause).await;
                    }
                    None => return Err(e.into()),
                },
                Err(e) => return Err(e.into()),
            }
        }
    }
}
