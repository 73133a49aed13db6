//! Running a command: one transaction at READ COMMITTED, retried from a clean
//! transaction when the database says a concurrent writer got in the way.
//!
//! A macro rather than a function taking a closure: an async closure over a
//! borrowed transaction does not give a future the compiler can prove `Send`
//! for every lifetime, and the HTTP server needs `Send` futures.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// How many times a command starts over before it answers with a conflict.
const MAX_RETRIES: usize = 8;

/// Jittered exponential pauses between attempts of one command.
pub(crate) fn backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(2))
        .with_max_delay(Duration::from_millis(200))
        .with_max_times(MAX_RETRIES)
        .with_jitter()
        .build()
}

/// `command!(store, |tx| { ...; Ok(value) })` runs the block in a fresh READ
/// COMMITTED transaction and commits; the block evaluates to
/// `Result<T, StoreError>` and may `return Err(..)` early. On a transient
/// failure (deadlock, serialization failure, lost insert race) the whole
/// transaction is rolled back and the block runs again from the start after a
/// jittered pause, so no decision rests on a read from a failed attempt.
/// Evaluates to `Result<T, berth_core::Error>`.
macro_rules! command {
    ($store:expr, |$tx:ident| $body:block) => {{
        let mut pauses = $crate::tx::backoff();
        let run = async {
            let mut client = $store.client().await?;
            loop {
                let attempt: ::std::result::Result<_, $crate::StoreError> = async {
                    let transaction = client.transaction().await?;
                    // The body is an async block of its own, so a `return`
                    // in it (Ok or Err) ends the body, never this attempt:
                    // an early `return Ok` still reaches the commit below.
                    let $tx: &::deadpool_postgres::Transaction<'_> = &transaction;
                    let out: ::std::result::Result<_, $crate::StoreError> = async { $body }.await;
                    let out = out?;
                    transaction.commit().await?;
                    Ok(out)
                }
                .await;
                match attempt {
                    Ok(out) => return Ok(out),
                    Err(e) if e.is_transient() => match pauses.next() {
                        Some(pause) => {
                            ::metrics::counter!("berth_command_retries").increment(1);
                            ::tracing::debug!(error = %e, ?pause, "command retried");
                            ::tokio::time::sleep(pause).await;
                        }
                        None => return Err(e),
                    },
                    Err(e) => return Err(e),
                }
            }
        };
        let result: ::std::result::Result<_, $crate::StoreError> = run.await;
        result.map_err(::berth_core::Error::from)
    }};
}
pub(crate) use command;
