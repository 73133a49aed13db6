use berth_core::error::{Error, ErrorCode, ErrorKind};

/// An error inside the store: a domain decision, or the database failing.
/// Commands retry on the transient database ones; everything leaves the
/// store as a [`berth_core::Error`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Domain(#[from] Error),
    #[error("database: {}", describe(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("connection pool: {0}")]
    Pool(String),
    /// No connection within the pool's wait or connect timeout.
    #[error("connection pool: {0}")]
    PoolTimeout(String),
    /// A database URL or setting that cannot be used as given.
    #[error("database settings: {0}")]
    Settings(String),
    /// The server did not answer within the deadline (crate::conn), before
    /// any `COMMIT` was sent: nothing was written.
    #[error("database: no answer within the deadline: {0}")]
    Lapsed(String),
    /// A `COMMIT` was sent and no answer came (a deadline, a connection
    /// lost): the transaction may or may not have committed.
    #[error("database: no answer to COMMIT: {0}")]
    OutcomeUnknown(String),
}

impl StoreError {
    pub(crate) fn sqlstate(&self) -> Option<&str> {
        match self {
            StoreError::Db(e) => e.code().map(|c| c.code()),
            _ => None,
        }
    }

    /// A deadlock, a serialization failure, a lost insert race, or a loan
    /// in the way of a one-round-trip commit (commands::loans): the command
    /// starts over in a fresh transaction and decides again.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self.sqlstate(), Some("40001" | "40P01" | "23505" | "BL001"))
    }

    /// A failure of a transaction's `COMMIT`: without the server's answer
    /// (an I/O error, a closed connection), whether it committed is unknown.
    pub(crate) fn committing(e: tokio_postgres::Error) -> StoreError {
        match e.as_db_error() {
            Some(_) => StoreError::Db(e),
            None => StoreError::OutcomeUnknown(e.to_string()),
        }
    }

    /// This failure, as the cause says it, when a deadline closed the
    /// connection (`lapsed`): a statement that got no answer then failed
    /// for want of one.
    pub(crate) fn lapsed_if(self, lapsed: bool) -> StoreError {
        match self {
            StoreError::Db(e) if lapsed && e.as_db_error().is_none() => StoreError::Lapsed(e.to_string()),
            e => e,
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        match e {
            StoreError::Domain(d) => d,
            StoreError::Db(db) => match db.code().map(|c| c.code()) {
                // A concurrent writer changed what this command read.
                Some("40001" | "40P01" | "23505") => Error::generation(format!("concurrent update: {}", describe(&db))),
                // A reference to something that is gone (deleted concurrently).
                Some("23503") => Error::new(ErrorKind::Conflict, ErrorCode::ConcurrentUpdate, describe(&db)),
                _ if is_unavailable(&db) => Error::unavailable(format!("database: {}", describe(&db))),
                _ => Error::internal(format!("database: {}", describe(&db))),
            },
            StoreError::Pool(p) | StoreError::PoolTimeout(p) => Error::unavailable(format!("database: {p}")),
            StoreError::Settings(s) => Error::internal(format!("database settings: {s}")),
            StoreError::Lapsed(d) => Error::unavailable(format!("database: no answer within the deadline ({d})")),
            StoreError::OutcomeUnknown(d) => Error::new(
                ErrorKind::Unavailable,
                ErrorCode::OutcomeUnknown,
                format!("database: no answer to COMMIT, the write may or may not have been made ({d})"),
            ),
        }
    }
}

/// The server is gone, going, refusing connections, or stopped a statement
/// at its timeout: the same request may succeed later. Anything else the
/// server says is a bug of ours.
fn is_unavailable(e: &tokio_postgres::Error) -> bool {
    match e.code().map(|c| c.code()) {
        // Connection exceptions, too many connections, shutdown and
        // start-up, a statement timeout or a cancel; a write refused because
        // the server is (or has just become) a standby: a failover under way.
        Some(code) => {
            code.starts_with("08") || matches!(code, "53300" | "57P01" | "57P02" | "57P03" | "57014" | "25006")
        }
        // No answer from the server at all: an I/O error, a closed
        // connection, or no host of several that takes writes (none is the
        // primary yet, `target_session_attrs=read-write`).
        None => e.as_db_error().is_none(),
    }
}

/// tokio-postgres prints only "db error"; say what the server said.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(d) => format!("{} ({}): {d}", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        None => e.to_string(),
    }
}
