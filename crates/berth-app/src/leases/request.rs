//! The operations' requests, as the edges make them of what they read,
//! and a dry run's windows.

use berth_store::commands::RequestKey;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

/// A reservation as asked: its type and its plugin's parameters.
pub struct NewReservation {
    pub resource_type: String,
    /// Its plugin's parameters (an `id` among them is dropped).
    pub params: Map<String, Value>,
}

/// A recurring lease: a five-field crontab schedule read in local time in
/// `time_zone` (an IANA name; None: UTC), a duration (seconds, or a number
/// with a unit), until when (a naive date read in `time_zone` too).
pub struct Recurrence {
    pub cron: String,
    pub duration: Value,
    pub until: String,
    pub time_zone: Option<String>,
}

/// A lease as asked: dates as given (`YYYY-MM-DD HH:MM` in UTC, or `now`).
pub struct CreateLease {
    pub name: String,
    pub start_date: Option<String>,
    /// Required unless recurring.
    pub end_date: Option<String>,
    pub before_end_date: Option<String>,
    pub reservations: Vec<NewReservation>,
    pub recurrence: Option<Recurrence>,
    /// Book nothing; answer the occurrences and whether each fits.
    pub dry_run: bool,
    /// The caller's key for this create, if it sent one.
    pub key: Option<RequestKey>,
    /// The most occurrences a recurrence may make.
    pub max_occurrences: usize,
    /// Book this offer (`POST /v1/offers`): its window and reservations;
    /// only `name` (and `key`) beside it.
    pub offer: Option<String>,
}

/// One window of a dry run, and whether its reservations fit there now
/// (capacity; quotas are checked when the lease is made).
pub struct Occurrence {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub fits: bool,
}

/// A change of one of the lease's reservations: its id and the parameters
/// to change.
pub struct ReservationChange {
    pub id: Uuid,
    pub params: Map<String, Value>,
}

/// A change as asked: a date, or a relative move of it (a duration), not
/// both.
pub struct LeaseChange {
    pub name: Option<String>,
    pub start_date: Option<String>,
    pub end_date: Option<String>,
    pub before_end_date: Option<String>,
    pub prolong_for: Option<Value>,
    pub reduce_by: Option<Value>,
    pub defer_by: Option<Value>,
    pub advance_by: Option<Value>,
    pub reservations: Vec<ReservationChange>,
}
