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

use chrono::Duration;
use uuid::Uuid;

use crate::error::Error;

mod class;
mod record;
mod recurrence;
mod rules;

pub use class::{reservation_class, reservation_of_class};
pub use record::{
    new_events, Demand, LeaseEventRecord, LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus,
    ReservationRecord, ReservationStatus, Slot,
};
pub use recurrence::{occurrences, Occurrence};
pub use rules::{before_end_time, check_change, check_name, check_new_window, LeaseChange};

/// The codes lease and host requests answer with.
pub use crate::error::lease_codes as codes;

/// The free pool: the Placement aggregate every enrolled host belongs to.
pub const FREE_POOL: Uuid = Uuid::from_u128(0x6265_7274_6866_7265_6570_6f6f_6c00_0001);

/// Most reservations one lease may carry.
pub const MAX_RESERVATIONS: usize = 32;
/// How long before the end the `before_end_lease` event fires by default.
pub const DEFAULT_BEFORE_END: Duration = Duration::hours(1);
/// A start this close to now is not "in the past" (clients send minutes).
pub const START_GRACE: Duration = Duration::seconds(60);

macro_rules! no_capacity_codes {
    ($($i:literal)*) => { [$(concat!("berth.lease.reservation_", $i, ".no_capacity")),*] };
}
const NO_CAPACITY_CODES: [&str; MAX_RESERVATIONS] =
    no_capacity_codes!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);

/// The code saying that reservation `index` (0-based, in request order)
/// did not fit: `berth.lease.reservation_<index>.no_capacity`.
pub fn no_capacity_code(index: usize) -> &'static str {
    NO_CAPACITY_CODES.get(index).copied().unwrap_or(codes::NO_CAPACITY)
}

/// Not enough capacity for reservation `index` of a lease (409).
pub fn no_capacity(index: usize, detail: impl Into<String>) -> Error {
    Error::new(crate::error::ErrorKind::Capacity, no_capacity_code(index), detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_capacity_codes_name_the_reservation() {
        assert_eq!(no_capacity_code(0), "berth.lease.reservation_0.no_capacity");
        assert_eq!(no_capacity_code(31), "berth.lease.reservation_31.no_capacity");
        assert_eq!(no_capacity_code(99), codes::NO_CAPACITY);
    }
}
