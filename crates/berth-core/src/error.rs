//! Typed domain errors. Each carries a stable machine-readable `code`; the
//! HTTP layer maps kinds to statuses and never has to parse a message.

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
    pub code: &'static str,
    /// For people.
    pub detail: String,
}

impl Error {
    pub fn new(kind: ErrorKind, code: &'static str, detail: impl Into<String>) -> Self {
        Error { kind, code, detail: detail.into() }
    }
    pub fn not_found(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, code, detail)
    }
    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, code, detail)
    }
    /// A client-supplied generation did not match the current one.
    pub fn generation(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, codes::CONCURRENT_UPDATE, detail)
    }
    pub fn capacity(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Capacity, codes::CAPACITY, detail)
    }
    pub fn invalid(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, code, detail)
    }
    pub fn in_use(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::InUse, code, detail)
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, codes::INTERNAL, detail)
    }
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, codes::UNAVAILABLE, detail)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.detail, self.code)
    }
}

impl std::error::Error for Error {}

/// The codes Berth answers with. Placement's own codes keep their names so
/// its clients can match on them.
pub mod codes {
    pub const CONCURRENT_UPDATE: &str = "placement.concurrent_update";
    pub const DUPLICATE_NAME: &str = "placement.duplicate_name";
    pub const INVENTORY_IN_USE: &str = "placement.inventory.inuse";
    pub const PROVIDER_IN_USE: &str = "placement.resource_provider.inuse";
    /// No such resource class (a 400 where a request names one).
    pub const RESOURCE_CLASS_NOT_FOUND: &str = "placement.resource_class.not_found";
    /// No such resource provider where a request names one.
    pub const PROVIDER_NOT_FOUND: &str = "placement.resource_provider.not_found";
    /// No such trait where a request names one.
    pub const TRAIT_NOT_FOUND: &str = "placement.trait.not_found";
    /// No inventory of that class on that provider.
    pub const INVENTORY_NOT_FOUND: &str = "placement.inventory.not_found";
    /// That class already has an inventory on that provider.
    pub const INVENTORY_EXISTS: &str = "placement.inventory.exists";
    pub const CANNOT_DELETE_PARENT: &str = "placement.resource_provider.cannot_delete_parent";
    pub const UNDEFINED: &str = "placement.undefined_code";
    pub const CAPACITY: &str = "berth.capacity.exceeded";
    pub const INVALID: &str = "berth.invalid";
    pub const NOT_FOUND: &str = "berth.not_found";
    pub const INTERNAL: &str = "berth.internal";
    pub const UNAVAILABLE: &str = "berth.unavailable";
    pub const STREAM_VERSION: &str = "berth.log.stream_version";
}

/// The codes lease and host requests answer with (`berth_core::lease::codes`
/// names them too). They live here, below `lease`, `dates` and `time`, so
/// that those modules can all answer with them without importing each other.
pub mod lease_codes {
    pub const INVALID_DATE: &str = "berth.lease.invalid_date";
    pub const INVALID_LEASE: &str = "berth.lease.invalid";
    pub const LEASE_NOT_FOUND: &str = "berth.lease.not_found";
    pub const LEASE_STARTED: &str = "berth.lease.started";
    pub const LEASE_ENDED: &str = "berth.lease.ended";
    pub const DUPLICATE_LEASE_NAME: &str = "berth.lease.duplicate_name";
    pub const HOST_NOT_FOUND: &str = "berth.host.not_found";
    pub const HOST_EXISTS: &str = "berth.host.already_enrolled";
    pub const HOST_IN_USE: &str = "berth.host.in_use";
    pub const HOST_INVALID: &str = "berth.host.invalid";
    pub const PROPERTY_NOT_FOUND: &str = "berth.host.property_not_found";
    /// A reservation past the first `lease::MAX_RESERVATIONS` (never
    /// reached: leases are refused before that).
    pub const NO_CAPACITY: &str = "berth.lease.no_capacity";
    /// A recurring lease books more occurrences than one request may.
    pub const TOO_MANY_OCCURRENCES: &str = "berth.lease.too_many_occurrences";
    /// A reservation names a parameter its plugin does not take.
    pub const UNKNOWN_PARAMETER: &str = "berth.lease.unknown_parameter";
    /// A reservation parameter's value is not of its type.
    pub const INVALID_PARAMETER: &str = "berth.lease.invalid_parameter";
    /// A reservation names an instance that is not a Placement consumer.
    pub const UNKNOWN_INSTANCE: &str = "berth.lease.unknown_instance";
    /// A reservation names another project's instance.
    pub const FOREIGN_INSTANCE: &str = "berth.lease.foreign_instance";
    /// An `Idempotency-Key` sent again with another request.
    pub const IDEMPOTENCY_KEY_REUSED: &str = "berth.lease.idempotency_key_reused";
    /// An `Idempotency-Key` that is empty, too long, not printable or repeated.
    pub const IDEMPOTENCY_KEY_INVALID: &str = "berth.lease.idempotency_key_invalid";
}
