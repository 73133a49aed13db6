//! Statements prepared once per connection: the hot paths run the same few
//! statements over and over, and parsing and planning each one anew costs
//! the server more than running it.

use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

use crate::client::GenericClient;

/// For the rest of the transaction, prepared statements run on their generic
/// plan, never compiled (JIT), with no sequential scan where an index serves.
/// The hot commands' statements take arrays, for
/// which the planner otherwise plans anew on every run (it never finds a
/// custom plan worse than the generic one), and planning costs more than
/// running them. A generic plan's cost is a guess over arrays of unknown
/// length and can pass the JIT threshold: compiling then takes longer than
/// the statement ever runs. A generic plan is made once, often while a table
/// is nearly empty and without statistics, where a sequential scan looks
/// cheapest; every statement on these paths looks rows up by key, so scans
/// are ruled out wherever an index serves. Set per transaction, not per
/// connection: other statements keep the planner's choices.
pub(crate) const GENERIC_PLANS: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
            set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true)";

/// A statement with its parameters, to send in a pipeline.
pub(crate) type Statement<'a> = (&'a str, &'a [&'a (dyn ToSql + Sync)]);

pub(crate) async fn query(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query(&statement, params).await
}

pub(crate) async fn execute(c: &impl GenericClient, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Error> {
    let statement = c.prepare_cached(sql).await?;
    c.execute(&statement, params).await
}

/// Runs statements in one round trip, in the order given: all are prepared
/// first (a statement still being prepared must not let a later one overtake
/// it), then sent together. The server runs them one after the other, so a
/// later statement sees what an earlier one locked. On failure the error is
/// the first statement's that failed, not the "transaction is aborted" the
/// ones after it get.
pub(crate) async fn pipeline<const N: usize>(
    c: &impl GenericClient,
    statements: [(&str, &[&(dyn ToSql + Sync)]); N],
) -> Result<[Vec<Row>; N], Error> {
    let rows = pipeline_all(c, &statements).await?;
    Ok(rows.try_into().unwrap_or_else(|_| unreachable!("one result per statement")))
}

/// As [`pipeline`], for however many statements.
pub(crate) async fn pipeline_all(c: &impl GenericClient, statements: &[Statement<'_>]) -> Result<Vec<Vec<Row>>, Error> {
    let prepared = futures::future::try_join_all(statements.iter().map(|(sql, _)| c.prepare_cached(sql))).await?;
    let results =
        futures::future::join_all(prepared.iter().zip(statements.iter()).map(|(st, (_, params))| c.query(st, params)))
            .await;
    results.into_iter().collect()
}

/// Of two results of statements sent together, the error that caused the
/// other: a statement after a failed one only reports the aborted transaction.
pub(crate) fn root_cause<E>(first: E, second: E, state: impl Fn(&E) -> Option<&str>) -> E {
    if state(&first) == Some("25P02") {
        second
    } else {
        first
    }
}
