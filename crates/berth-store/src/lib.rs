//! berth-store: everything Berth keeps in PostgreSQL.
//!
//! The connection pool and migrations, the append-only log (append with
//! per-stream optimistic concurrency, read with a cursor that never skips),
//! the projections and the one function that applies an event to them, the
//! commands (each one transaction at READ COMMITTED that locks, decides with
//! berth-core's rules, appends and applies), the queries over projections,
//! replay, and a launcher for a local PostgreSQL.
//!
//! Nothing outside this crate writes SQL. This crate knows nothing of HTTP.

#![warn(clippy::arithmetic_side_effects)]

pub mod commands;
pub mod launcher;
pub mod log;
pub mod migrate;
pub mod notify;
pub mod projection;
pub mod queries;
pub mod replay;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

mod error;
mod quota;
mod sql;
mod tx;

pub use error::StoreError;
pub use launcher::LocalPostgres;
pub use log::{Cursor, RecordedEvent};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

/// A handle on Berth's database: a pool of connections. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// For connections of their own (notifications).
    url: String,
    /// Claims waiting to be decided together (commands::claims).
    claims: std::sync::Arc<commands::Claims>,
}

impl Store {
    /// Connects a pool of at most `max_size` connections to `url`.
    pub fn connect(url: &str, max_size: usize) -> Result<Store, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(StoreError::Db)?;
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager).max_size(max_size).build().map_err(|e| StoreError::Pool(e.to_string()))?;
        Ok(Store { pool, url: url.to_string(), claims: Default::default() })
    }

    /// Decides claims in at most `lanes` transactions at once (see
    /// commands::claims; about the database server's cores).
    pub fn with_claim_lanes(mut self, lanes: usize) -> Store {
        self.claims = std::sync::Arc::new(commands::Claims::with_lanes(lanes));
        self
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| StoreError::Pool(e.to_string()))
    }

    /// Whether the database answers (for `/readyz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let c = self.client().await?;
        c.simple_query("SELECT 1").await?;
        Ok(())
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}
