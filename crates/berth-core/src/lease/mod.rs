//! Leases: their records in the log, their statuses, and the rules for
//! creating and changing them. Pure: callers pass `now` in.
//!
//! A lease holds a window `[start, end)`; each of its reservations is placed
//! on providers as slots (one consumer each) that hold their resources over
//! that window. Each lease has three lease events (`start_lease`,
//! `before_end_lease`, `end_lease`) that the manager fires.
//!
//! - `record`: the lease, its reservations, slots and lease events as the log
//!   carries them, and their statuses.
//! - `rules`: the checks a new lease and an update pass (window, name).
//! - `recurrence`: the occurrences a recurring lease books.
//! - `class`: the resource class a reservation's flavor requests.
//! - `heal`: what replaces the unusable hosts a reservation holds.
//! - `split`: which slots a split moves into a new lease.

use chrono::Duration;
use uuid::Uuid;

use crate::error::{Error, ErrorCode};

mod class;
pub mod heal;
mod record;
mod recurrence;
mod rules;
pub mod split;

pub use class::{reservation_class, reservation_of_class};
pub use record::{
    new_events, Demand, LeaseEventRecord, LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus,
    ReservationRecord, ReservationStatus, Slot,
};
pub use recurrence::{occurrences, Occurrence};
pub use rules::{before_end_time, check_change, check_name, check_new_window, LeaseChange};

/// The free pool: the Placement aggregate every enrolled host belongs to.
pub const FREE_POOL: Uuid = Uuid::from_u128(0x6265_7274_6866_7265_6570_6f6f_6c00_0001);

/// Most reservations one lease may carry.
pub const MAX_RESERVATIONS: usize = 32;
const _: () = assert!(crate::code::NO_CAPACITY_CODES.len() == MAX_RESERVATIONS);
/// How long before the end the `before_end_lease` event fires by default.
pub const DEFAULT_BEFORE_END: Duration = Duration::hours(1);
/// A start this close to now is not "in the past" (clients send minutes).
pub const START_GRACE: Duration = Duration::seconds(60);

/// Not enough capacity for reservation `index` of a lease (409).
pub fn no_capacity(index: usize, detail: impl Into<String>) -> Error {
    Error::new(crate::error::ErrorKind::Capacity, ErrorCode::ReservationNoCapacity(index), detail)
}
