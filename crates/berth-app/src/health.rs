//! How the server stands, for operators and probes: this process's clock
//! against the database's, and the database pool's figures.

pub use berth_store::{ClockOffset, PoolStatus};

use crate::App;

/// The health questions, over one [`App`].
pub struct Health<'a> {
    app: &'a App,
}

impl Health<'_> {
    /// This process's clock minus the database's, measured by one round
    /// trip (which also says the database answers).
    pub async fn clock_offset(&self) -> Result<ClockOffset, berth_core::Error> {
        self.app.store.clock_offset().await
    }

    /// The pool's connections: at most, open, idle, and callers waiting.
    pub fn pool(&self) -> PoolStatus {
        self.app.store.pool_status()
    }
}

impl App {
    /// The health questions.
    pub fn health(&self) -> Health<'_> {
        Health { app: self }
    }
}
