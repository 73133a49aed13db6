//! Statements prepared once per connection: the hot paths run the same few
//! statements over and over, and parsing and planning each one anew costs
//! the server more than running it.

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

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
