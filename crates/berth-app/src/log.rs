//! The event log as operators read it: entries after a cursor, a page at
//! a time (a live tail reads the same pages), or the last few.

pub use berth_store::{Cursor, RecordedEvent};

use crate::{Allowed, App, Rule};

/// The log use cases, over one [`App`].
pub struct Log<'a> {
    app: &'a App,
}

impl Log<'_> {
    /// At most `limit` entries after `after`, in log order.
    pub async fn page(&self, a: Allowed, after: Cursor, limit: i64) -> Result<Vec<RecordedEvent>, berth_core::Error> {
        debug_assert_eq!(a.0, Rule::LogRead);
        self.app.store.read_log(after, limit).await
    }

    /// The last `limit` entries, in log order; reading after the last of
    /// them follows on without a gap.
    pub async fn last(&self, a: Allowed, limit: i64) -> Result<Vec<RecordedEvent>, berth_core::Error> {
        debug_assert_eq!(a.0, Rule::LogRead);
        self.app.store.read_log_last(limit).await
    }
}

impl App {
    /// The log use cases.
    pub fn log(&self) -> Log<'_> {
        Log { app: self }
    }
}
