//! Running a command: one transaction at READ COMMITTED, retried from a clean
//! transaction when the database says a concurrent writer got in the way.
//!
//! A macro rather than a function taking a closure: an async closure over a
//! borrowed transaction does not give a future the compiler can prove `Send`
//! for every lifetime, and the HTTP server needs `Send` futures.
//!
//! Two kinds of transaction: tokio-postgres's (`command!`), which waits for
//! its `BEGIN` and sends `COMMIT` alone, and [`Pipelined`] (`pipelined!`),
//! which sends `BEGIN` with its first statements and `COMMIT` with its last,
//! for the claim path, where each round trip lengthens every lock it holds.

use std::sync::Mutex;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::future::{maybe_done, BoxFuture, MaybeDone};
use futures::FutureExt;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::client::GenericClient;
use crate::StoreError;

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

/// `attempts!(store, |client| attempt)`: runs `attempt` (a future on the
/// pooled `client`, giving `Result<T, StoreError>`) until it succeeds, fails
/// for good, or has failed transiently [`MAX_RETRIES`] times, pausing in
/// between. Each attempt must leave `client` out of any transaction.
macro_rules! attempts {
    ($store:expr, |$client:ident| $attempt:expr) => {{
        let mut pauses = $crate::tx::backoff();
        let run = async {
            #[allow(unused_mut)] // `command!` begins its transaction on `&mut`
            let mut $client = $store.client().await?;
            loop {
                let attempt: ::std::result::Result<_, $crate::StoreError> = $attempt.await;
                match attempt {
                    Ok(out) => return Ok(out),
                    Err(e) if e.is_transient() => match pauses.next() {
                        Some(pause) => {
                            ::metrics::counter!("berth_command_retries").increment(1);
                            ::tracing::debug!(error = %e, ?pause, "command retried");
                            ::tokio::time::sleep(pause).await;
                            // Each attempt has the whole deadline (crate::conn).
                            $client.rearm();
                        }
                        None => return Err(e),
                    },
                    Err(e) => return Err(e.lapsed_if($client.lapsed())),
                }
            }
        };
        let result: ::std::result::Result<_, $crate::StoreError> = run.await;
        result.map_err(::berth_core::Error::from)
    }};
}
pub(crate) use attempts;

/// `command!(store, |tx| { ...; Ok(value) })` runs the block in a fresh READ
/// COMMITTED transaction and commits; the block evaluates to
/// `Result<T, StoreError>` and may `return Err(..)` early. On a transient
/// failure (deadlock, serialization failure, lost insert race) the whole
/// transaction is rolled back and the block runs again from the start after a
/// jittered pause, so no decision rests on a read from a failed attempt.
/// Evaluates to `Result<T, berth_core::Error>`.
macro_rules! command {
    ($store:expr, |$tx:ident| $body:block) => {{
        $crate::tx::attempts!($store, |client| async {
            // Dropped unfinished (an error, a `?`), it sends ROLLBACK.
            let transaction = client.transaction().await?;
            // The body is an async block of its own, so a `return`
            // in it (Ok or Err) ends the body, never this attempt:
            // an early `return Ok` still reaches the commit below.
            let $tx: &::deadpool_postgres::Transaction<'_> = &transaction;
            let out: ::std::result::Result<_, $crate::StoreError> = async { $body }.await;
            let out = out?;
            transaction.commit().await.map_err($crate::StoreError::committing)?;
            Ok(out)
        })
    }};
}
pub(crate) use command;

/// `pipelined!(store, |tx| { ...; Ok(value) })`: as `command!`, in a
/// [`Pipelined`] transaction: the block's first statements carry the
/// `BEGIN`, and it may commit with its last ones
/// ([`Pipelined::commit_with`]); if it has not, the transaction commits
/// after it, in a round trip of its own.
macro_rules! pipelined {
    ($store:expr, |$tx:ident| $body:block) => {{
        $crate::tx::attempts!($store, |client| async {
            // Dropped with its transaction open (an error, a `?`), it sends ROLLBACK.
            let transaction = $crate::tx::Pipelined::new(&client);
            let $tx: &$crate::tx::Pipelined<'_> = &transaction;
            let out: ::std::result::Result<_, $crate::StoreError> = async { $body }.await;
            let out = out?;
            transaction.commit().await?;
            Ok(out)
        })
    }};
}
pub(crate) use pipelined;

/// Where a [`Pipelined`] transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing sent: no transaction open.
    NotBegun,
    /// `BEGIN` sent: a transaction may be open on the connection (aborted
    /// or not) until a `COMMIT` is answered as one.
    Open,
    /// Committed: nothing more may be sent in it.
    Committed,
}

const BEGIN: &str = "BEGIN";

/// PostgreSQL answers `COMMIT` in a transaction that a statement aborted
/// with a `ROLLBACK` tag, not an error, and tokio-postgres shows no tag. So
/// the `COMMIT` goes in one query string behind a statement that fails in
/// an aborted transaction: the server then skips the rest of the string,
/// and the caller gets that failure instead of a commit that was none.
const COMMIT: &str = "SELECT 1; COMMIT";

const ROLLBACK: &str = "ROLLBACK";

/// A transaction on a pooled connection without round trips of its own:
/// `BEGIN` goes out with its first statements ([`Pipelined::pipeline`]) and
/// `COMMIT` with its last ([`Pipelined::commit_with`]). All or nothing:
/// - every statement is prepared before its pipeline is sent, and each
///   message is sent in order (one still being prepared would let the
///   `COMMIT` overtake it);
/// - a commit is trusted only when every statement of its pipeline
///   succeeded, and never runs in an aborted transaction ([`COMMIT`]);
/// - dropped with its transaction open (a failed statement, an error of
///   the command, a caller gone), it sends `ROLLBACK`, as tokio-postgres's
///   `Transaction` does, before the connection goes back to the pool: the
///   next user's statements run after it.
pub(crate) struct Pipelined<'a> {
    client: &'a deadpool_postgres::ClientWrapper,
    state: Mutex<State>,
}

type Statements<'s> = [(&'s str, &'s [&'s (dyn ToSql + Sync)])];

/// One message of a pipeline and its answer (none for BEGIN and COMMIT).
type Step<'c> = BoxFuture<'c, Result<Vec<Row>, tokio_postgres::Error>>;

impl<'a> Pipelined<'a> {
    /// A transaction on `client`, not begun: nothing is sent yet.
    pub(crate) fn new(client: &'a deadpool_postgres::ClientWrapper) -> Pipelined<'a> {
        Pipelined { client, state: Mutex::new(State::NotBegun) }
    }

    fn state(&self) -> State {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, state: State) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
    }

    /// Whether its first statements have been sent.
    pub(crate) fn has_begun(&self) -> bool {
        self.state() != State::NotBegun
    }

    /// Runs `statements` in one round trip, in order, as
    /// [`crate::sql::pipeline`] does; `BEGIN` first if the transaction has
    /// not begun. On failure, the error of the first statement that failed.
    pub(crate) async fn pipeline<const N: usize>(
        &self,
        statements: [(&str, &[&(dyn ToSql + Sync)]); N],
    ) -> Result<[Vec<Row>; N], StoreError> {
        let rows = self.send(&statements, false).await?;
        Ok(rows.try_into().unwrap_or_else(|_| unreachable!("one result per statement")))
    }

    /// Runs `statements` and commits, in one round trip.
    pub(crate) async fn commit_with<const N: usize>(
        &self,
        statements: [(&str, &[&(dyn ToSql + Sync)]); N],
    ) -> Result<[Vec<Row>; N], StoreError> {
        let rows = self.send(&statements, true).await?;
        Ok(rows.try_into().unwrap_or_else(|_| unreachable!("one result per statement")))
    }

    /// As [`Pipelined::pipeline`], for however many statements.
    pub(crate) async fn pipeline_all(&self, statements: &Statements<'_>) -> Result<Vec<Vec<Row>>, StoreError> {
        self.send(statements, false).await
    }

    /// As [`Pipelined::commit_with`], for however many statements.
    pub(crate) async fn commit_with_all(&self, statements: &Statements<'_>) -> Result<Vec<Vec<Row>>, StoreError> {
        self.send(statements, true).await
    }

    /// Commits, in a round trip of its own, unless it has committed already
    /// or never begun.
    pub(crate) async fn commit(&self) -> Result<(), StoreError> {
        if self.state() == State::Open {
            self.send(&[], true).await?;
        }
        Ok(())
    }

    /// The connection, for statements of the transaction sent one by one;
    /// `BEGIN` is sent first, alone, if the transaction has not begun.
    pub(crate) async fn client(&self) -> Result<&'a deadpool_postgres::ClientWrapper, StoreError> {
        if self.state() != State::Open {
            self.send(&[], false).await?;
        }
        Ok(self.client)
    }

    async fn send(&self, statements: &Statements<'_>, commit: bool) -> Result<Vec<Vec<Row>>, StoreError> {
        if self.state() == State::Committed {
            let e = berth_core::Error::internal("a statement was sent after its transaction committed");
            return Err(StoreError::Domain(e));
        }
        let c = self.client;
        let prepared = futures::future::try_join_all(statements.iter().map(|(sql, _)| c.prepare_cached(sql))).await?;
        let begin = self.state() == State::NotBegun;
        // From here on a transaction may be open on the server.
        self.set(State::Open);
        let mut steps: Vec<MaybeDone<Step<'_>>> = Vec::with_capacity(statements.len() + 2);
        if begin {
            steps.push(maybe_done(Box::pin(async move { c.batch_execute(BEGIN).await.map(|()| Vec::new()) })));
        }
        for (st, (_, params)) in prepared.iter().zip(statements) {
            steps.push(maybe_done(Box::pin(c.query(st, params))));
        }
        // Each step sends its messages when first polled, so they go out
        // in order, and the server runs them so. One that failed at once may
        // have sent nothing (a parameter that does not encode, a closed
        // connection): the COMMIT must not go after the others then. One
        // done at once without error was sent and answered already (this
        // thread paused after sending it while the server ran it): it is
        // no reason to hold the COMMIT back.
        let mut unsent = false;
        for step in &mut steps {
            if futures::poll!(&mut *step).is_ready() {
                unsent |= std::pin::Pin::new(&mut *step).output_mut().is_none_or(|r| r.is_err());
            }
        }
        if commit && !unsent {
            steps.push(maybe_done(Box::pin(async move { c.batch_execute(COMMIT).await.map(|()| Vec::new()) })));
        }
        futures::future::join_all(steps.iter_mut()).await;
        // The first error is the cause: those after it only say that the
        // transaction is aborted. Once the COMMIT went out, one that is no
        // answer from the server leaves the outcome unknown.
        let mut out = steps
            .iter_mut()
            .map(|s| std::pin::Pin::new(s).take_output().expect("every step is done"))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| if commit && !unsent { StoreError::committing(e) } else { StoreError::Db(e) })?;
        if commit {
            if unsent {
                return Err(StoreError::Domain(berth_core::Error::internal("a pipeline's COMMIT was not sent")));
            }
            // Every step answered without error, the COMMIT's guard included.
            out.pop();
            self.set(State::Committed);
        }
        if begin {
            out.remove(0);
        }
        Ok(out)
    }
}

impl Drop for Pipelined<'_> {
    fn drop(&mut self) {
        if self.state() == State::Open {
            // Polled once: the message is sent then, and its answer is not
            // awaited (tokio-postgres's `Transaction` rolls back so on drop).
            let _ = self.client.batch_execute(ROLLBACK).now_or_never();
        }
    }
}
