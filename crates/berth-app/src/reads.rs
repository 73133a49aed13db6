//! Reads from hot standbys, and reading one's own writes: a request's
//! reads that may be slightly stale run inside [`stale_ok`], and a write's
//! answer carries the [`Lsn`] a later read must see ([`Reads::write_token`]).

pub use berth_store::replicas::{stale_ok, stale_ok_scope, Lsn};

use crate::App;

/// The read-routing questions, over one [`App`].
pub struct Reads<'a> {
    app: &'a App,
}

impl Reads<'_> {
    /// Whether any standby is configured to read from.
    pub fn has_replicas(&self) -> bool {
        self.app.store.has_replicas()
    }

    /// The primary's WAL position now: a read that names it sees every
    /// write committed before this call.
    pub async fn write_token(&self) -> Result<Lsn, berth_core::Error> {
        self.app.store.write_token().await
    }
}

impl App {
    /// The read-routing questions.
    pub fn reads(&self) -> Reads<'_> {
        Reads { app: self }
    }
}
