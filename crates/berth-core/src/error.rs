//! Typed domain errors. Each carries a stable machine-readable `code`; the
//! HTTP layer maps kinds to statuses and never has to parse a message.

pub use crate::code::ErrorCode;
pub use crate::refusal::Refusal;
use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, as a kind the HTTP layer can map without string matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The named thing does not exist (404).
    NotFound,
    /// A stale generation, a duplicate, or a state that forbids the change (409).
    Conflict,
    /// Not enough capacity for the request at some instant of its window (409).
    Capacity,
    /// The input is malformed or violates a rule (400).
    Invalid,
    /// The thing is still used by something else (409).
    InUse,
    /// A quota would be exceeded (403).
    Quota,
    /// The caller may not do this (403).
    Forbidden,
    /// Something broke on our side (500); never bad input.
    Internal,
    /// The database cannot be reached or did not answer in time (503): the
    /// same request may succeed later.
    Unavailable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// Stable, dotted, machine-readable, e.g. `placement.concurrent_update`.
    pub code: ErrorCode,
    /// For people; for a refusal, its facts as Rust prints them (the API
    /// words the refusal itself).
    pub detail: String,
    /// What a Placement command refused, for the API to word.
    pub refusal: Option<Box<Refusal>>,
}

impl Error {
    pub fn new(kind: ErrorKind, code: ErrorCode, detail: impl Into<String>) -> Self {
        Error { kind, code, detail: detail.into(), refusal: None }
    }
    /// A refusal the API words.
    pub fn refused(kind: ErrorKind, code: ErrorCode, refusal: Refusal) -> Self {
        Error { kind, code, detail: format!("{refusal:?}"), refusal: Some(Box::new(refusal)) }
    }
    pub fn not_found(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, code, detail)
    }
    pub fn conflict(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, code, detail)
    }
    /// A client-supplied generation did not match the current one.
    pub fn generation(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, ErrorCode::ConcurrentUpdate, detail)
    }
    pub fn capacity(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Capacity, ErrorCode::Capacity, detail)
    }
    pub fn invalid(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, code, detail)
    }
    pub fn in_use(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::InUse, code, detail)
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, ErrorCode::Internal, detail)
    }
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, ErrorCode::Unavailable, detail)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.detail, self.code)
    }
}

impl std::error::Error for Error {}
