use berth_core::error::{Error, ErrorKind};

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
}

impl StoreError {
    pub(crate) fn sqlstate(&self) -> Option<&str> {
        match self {
            StoreError::Db(e) => e.code().map(|c| c.code()),
            _ => None,
        }
    }

    /// A deadlock, a serialization failure or a lost insert race: the command
    /// starts over in a fresh transaction and decides again.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self.sqlstate(), Some("40001" | "40P01" | "23505"))
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
                Some("23503") => {
                    Error::new(ErrorKind::Conflict, berth_core::error::codes::CONCURRENT_UPDATE, describe(&db))
                }
                _ => Error::internal(format!("database: {}", describe(&db))),
            },
            StoreError::Pool(p) => Error::internal(format!("database unavailable: {p}")),
        }
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
