//! Leases: their records in the log, their statuses, and the rules for
//! creating and changing them. Pure: callers pass `now` in.
//!
//! A lease holds a window `[start, end)`; each of its reservations is placed
//! on providers as slots (one consumer each) that hold their resources over
//! that window. Each lease has three lease events (`start_lease`,
//! `before_end_lease`, `end_lease`) that the manager fires.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Error;
use crate::query::Query;
use crate::time::DateMath;

/// The codes lease and host requests answer with.
pub mod codes {
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
    /// A reservation past the first [`super::MAX_RESERVATIONS`] (never
    /// reached: leases are refused before that).
    pub const NO_CAPACITY: &str = "berth.lease.no_capacity";
    /// A reservation names a parameter its plugin does not take.
    pub const TOO_MANY_OCCURRENCES: &str = "berth.lease.too_many_occurrences";
    pub const UNKNOWN_PARAMETER: &str = "berth.lease.unknown_parameter";
    /// A reservation parameter's value is not of its type.
    pub const INVALID_PARAMETER: &str = "berth.lease.invalid_parameter";
    /// A reservation names an instance that is not a Placement consumer.
    pub const UNKNOWN_INSTANCE: &str = "berth.lease.unknown_instance";
    /// A reservation names another project's instance.
    pub const FOREIGN_INSTANCE: &str = "berth.lease.foreign_instance";
}

/// The free pool: the Placement aggregate every enrolled host belongs to.
pub const FREE_POOL: Uuid = Uuid::from_u128(0x6265_7274_6866_7265_6570_6f6f_6c00_0001);

/// Most reservations one lease may carry.
pub const MAX_RESERVATIONS: usize = 32;
/// How far past the cap a refused recurrence's occurrences are counted
/// for its error.
const OCCURRENCES_COUNTED: usize = 100_000;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LeaseStatus {
    Pending,
    Starting,
    Active,
    Updating,
    Terminating,
    Terminated,
    Deleting,
    Error,
}

impl LeaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseStatus::Pending => "PENDING",
            LeaseStatus::Starting => "STARTING",
            LeaseStatus::Active => "ACTIVE",
            LeaseStatus::Updating => "UPDATING",
            LeaseStatus::Terminating => "TERMINATING",
            LeaseStatus::Terminated => "TERMINATED",
            LeaseStatus::Deleting => "DELETING",
            LeaseStatus::Error => "ERROR",
        }
    }

    pub fn parse(s: &str) -> Option<LeaseStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_uppercase())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseEventType {
    StartLease,
    BeforeEndLease,
    EndLease,
}

impl LeaseEventType {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseEventType::StartLease => "start_lease",
            LeaseEventType::BeforeEndLease => "before_end_lease",
            LeaseEventType::EndLease => "end_lease",
        }
    }
    pub fn parse(s: &str) -> Option<LeaseEventType> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LeaseEventStatus {
    Undone,
    InProgress,
    Done,
    Error,
}

impl LeaseEventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseEventStatus::Undone => "UNDONE",
            LeaseEventStatus::InProgress => "IN_PROGRESS",
            LeaseEventStatus::Done => "DONE",
            LeaseEventStatus::Error => "ERROR",
        }
    }
    pub fn parse(s: &str) -> Option<LeaseEventStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReservationStatus {
    Pending,
    Active,
    Deleted,
    Error,
}

impl ReservationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationStatus::Pending => "pending",
            ReservationStatus::Active => "active",
            ReservationStatus::Deleted => "deleted",
            ReservationStatus::Error => "error",
        }
    }
    pub fn parse(s: &str) -> Option<ReservationStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

/// One placed unit of a reservation: a consumer that holds `resources` on
/// `provider` over the lease's window (a whole host, or one instance slot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    pub consumer: Uuid,
    pub provider: Uuid,
    pub resources: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationRecord {
    pub id: Uuid,
    pub resource_type: String,
    /// The pool (a Placement aggregate) for host reservations; the
    /// reservation's own id otherwise.
    pub resource_id: Uuid,
    pub status: ReservationStatus,
    /// The reservation's parameters as the client gave them.
    pub params: serde_json::Value,
    pub slots: Vec<Slot>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseEventRecord {
    pub id: Uuid,
    pub event_type: LeaseEventType,
    pub time: DateTime<Utc>,
    pub status: LeaseEventStatus,
}

/// A lease as its log events carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub id: Uuid,
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub status: LeaseStatus,
    pub degraded: bool,
    /// Leases booked together by one recurring request share this id.
    pub recurrence_id: Option<Uuid>,
    pub reservations: Vec<ReservationRecord>,
    pub events: Vec<LeaseEventRecord>,
}

/// What a reservation needs, as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Demand {
    /// Between `min` and `max` whole hosts free over the whole window.
    Hosts { min: u32, max: u32, hypervisor_properties: Option<Query>, resource_properties: Option<Query> },
    /// `amount` slots of `resources`; `affinity` true: one host, false:
    /// distinct hosts, None: any.
    Slots { amount: u32, resources: BTreeMap<String, i64>, affinity: Option<bool>, resource_properties: Option<Query> },
    /// Nothing held in Berth's inventory.
    Nothing,
}

/// The window a new lease asks for, checked against `now`: a start in the
/// past (other than `now` itself) or an end not after the start is refused.
pub fn check_new_window(
    start: DateTime<Utc>,
    start_is_now: bool,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    if !start_is_now && start < now.saturating_minus(START_GRACE) {
        return Err(Error::invalid(
            codes::INVALID_DATE,
            format!("start_date {} is in the past (now is {})", crate::dates::format_date(start), fmt(now)),
        ));
    }
    if end <= start {
        return Err(Error::invalid(
            codes::INVALID_DATE,
            format!("end_date {} is not after start_date {}", fmt(end), fmt(start)),
        ));
    }
    Ok(())
}

fn fmt(t: DateTime<Utc>) -> String {
    crate::dates::format_date(t)
}

/// When `before_end_lease` fires: the given time, which must lie within
/// the window, or an hour before the end (not before the start).
pub fn before_end_time(
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    given: Option<DateTime<Utc>>,
) -> Result<DateTime<Utc>, Error> {
    match given {
        Some(t) if t < start || t > end => Err(Error::invalid(
            codes::INVALID_DATE,
            format!("before_end_date {} is not between start_date {} and end_date {}", fmt(t), fmt(start), fmt(end)),
        )),
        Some(t) => Ok(t),
        None => Ok(end.saturating_minus(DEFAULT_BEFORE_END).max(start)),
    }
}

/// The three lease events of a new lease.
pub fn new_events(start: DateTime<Utc>, before_end: DateTime<Utc>, end: DateTime<Utc>) -> Vec<LeaseEventRecord> {
    [(LeaseEventType::StartLease, start), (LeaseEventType::BeforeEndLease, before_end), (LeaseEventType::EndLease, end)]
        .into_iter()
        .map(|(event_type, time)| LeaseEventRecord {
            id: Uuid::new_v4(),
            event_type,
            time,
            status: LeaseEventStatus::Undone,
        })
        .collect()
}

impl LeaseRecord {
    pub fn event(&self, t: LeaseEventType) -> Option<&LeaseEventRecord> {
        self.events.iter().find(|e| e.event_type == t)
    }

    /// Started: its start event left UNDONE, its status left PENDING, or
    /// its start time has come.
    pub fn has_started(&self, now: DateTime<Utc>) -> bool {
        self.status != LeaseStatus::Pending
            || self.event(LeaseEventType::StartLease).is_some_and(|e| e.status != LeaseEventStatus::Undone)
            || self.start <= now
    }

    /// Ended: terminated, its end event done, or its end has passed.
    pub fn has_ended(&self, now: DateTime<Utc>) -> bool {
        matches!(self.status, LeaseStatus::Terminated | LeaseStatus::Terminating)
            || self.event(LeaseEventType::EndLease).is_some_and(|e| e.status == LeaseEventStatus::Done)
            || self.end <= now
    }
}

/// What an update asks for; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct LeaseChange {
    pub name: Option<String>,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    pub before_end: Option<DateTime<Utc>>,
    /// Whether any reservation's parameters change.
    pub reservations: bool,
}

/// Checks an update against the lease as it stands and answers the new
/// window: a started lease keeps its start; an ended lease may only be
/// renamed; the end never moves before now; the end stays after the start.
pub fn check_change(
    lease: &LeaseRecord,
    change: &LeaseChange,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), Error> {
    let moves_start = change.start.is_some_and(|s| s != lease.start);
    let moves_end = change.end.is_some_and(|e| e != lease.end);
    if lease.has_ended(now) && (moves_start || moves_end || change.reservations || change.before_end.is_some()) {
        return Err(Error::conflict(
            codes::LEASE_ENDED,
            format!("lease {} has ended: it can only be renamed", lease.id),
        ));
    }
    if moves_start {
        if lease.has_started(now) {
            return Err(Error::conflict(
                codes::LEASE_STARTED,
                format!("lease {} has started: its start_date cannot change", lease.id),
            ));
        }
        let s = change.start.expect("moves_start");
        if s < now.saturating_minus(START_GRACE) {
            return Err(Error::invalid(codes::INVALID_DATE, format!("start_date {} is in the past", fmt(s))));
        }
    }
    let start = change.start.unwrap_or(lease.start);
    let end = change.end.unwrap_or(lease.end);
    if moves_end && end < now {
        return Err(Error::invalid(
            codes::INVALID_DATE,
            format!("end_date {} is in the past (now is {})", fmt(end), fmt(now)),
        ));
    }
    if end <= start {
        return Err(Error::invalid(
            codes::INVALID_DATE,
            format!("end_date {} is not after start_date {}", fmt(end), fmt(start)),
        ));
    }
    if let Some(name) = &change.name {
        check_name(name)?;
    }
    Ok((start, end))
}

pub fn check_name(name: &str) -> Result<(), Error> {
    if name.trim().is_empty() || name.chars().count() > 80 {
        return Err(Error::invalid(codes::INVALID_LEASE, "a lease name is 1 to 80 characters"));
    }
    Ok(())
}

/// The reservation's resource class as Blazar's flavors request it:
/// `CUSTOM_RESERVATION_<id, upper-case, dashes as underscores>`.
pub fn reservation_class(reservation: Uuid) -> String {
    format!("CUSTOM_RESERVATION_{}", reservation.hyphenated().to_string().to_ascii_uppercase().replace('-', "_"))
}

/// The reservation a `CUSTOM_RESERVATION_...` class names, if it is one.
pub fn reservation_of_class(class: &str) -> Option<Uuid> {
    let rest = class.strip_prefix("CUSTOM_RESERVATION_")?;
    Uuid::parse_str(&rest.replace('_', "-").to_ascii_lowercase()).ok()
}

/// One occurrence of a recurring lease: its start and end.
pub type Occurrence = (DateTime<Utc>, DateTime<Utc>);

/// Occurrences of a recurring lease: each instant the schedule fires in
/// `[from, until)`, with its window of `duration`. Refuses schedules that
/// overlap themselves or book more than `max`, saying how many they would.
pub fn occurrences(
    fires: impl IntoIterator<Item = DateTime<Utc>>,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    duration: Duration,
    max: usize,
) -> Result<Vec<Occurrence>, Error> {
    let mut out: Vec<Occurrence> = Vec::new();
    let mut fires = fires.into_iter();
    while let Some(t) = fires.next() {
        if t < from {
            continue;
        }
        if t >= until {
            break;
        }
        if let Some(last) = out.last() {
            if t < last.1 {
                return Err(Error::invalid(
                    codes::INVALID_LEASE,
                    format!("recurrence: occurrences at {} and {} overlap; shorten the duration", fmt(last.0), fmt(t)),
                ));
            }
        }
        if out.len() == max {
            let more = fires.take_while(|t| *t < until).take(OCCURRENCES_COUNTED).count();
            let count = match more {
                OCCURRENCES_COUNTED => format!("more than {}", max.saturating_add(OCCURRENCES_COUNTED)),
                n => max.saturating_add(n).saturating_add(1).to_string(),
            };
            return Err(Error::invalid(
                codes::TOO_MANY_OCCURRENCES,
                format!(
                    "recurrence books {count} occurrences, more than the {max} one request may; bring its end closer"
                ),
            ));
        }
        out.push((t, t.plus("an occurrence's end", duration)?));
    }
    if out.is_empty() {
        return Err(Error::invalid(codes::INVALID_LEASE, "recurrence: the schedule fires no time before its end"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
    }

    fn lease(start: u32, end: u32) -> LeaseRecord {
        LeaseRecord {
            id: Uuid::nil(),
            name: "l".into(),
            project_id: "p".into(),
            user_id: "u".into(),
            start: t(start),
            end: t(end),
            status: LeaseStatus::Pending,
            degraded: false,
            recurrence_id: None,
            reservations: vec![],
            events: new_events(t(start), t(end - 1), t(end)),
        }
    }

    #[test]
    fn new_windows() {
        assert!(check_new_window(t(2), false, t(3), t(1)).is_ok());
        assert_eq!(check_new_window(t(0), false, t(3), t(1)).unwrap_err().code, codes::INVALID_DATE);
        assert!(check_new_window(t(0), true, t(3), t(0)).is_ok());
        assert!(check_new_window(t(2), false, t(2), t(1)).is_err());
        assert!(check_new_window(t(3), false, t(2), t(1)).is_err());
    }

    #[test]
    fn before_end_defaults_to_an_hour_before() {
        assert_eq!(before_end_time(t(1), t(5), None).unwrap(), t(4));
        assert_eq!(before_end_time(t(1), t(1) + Duration::minutes(30), None).unwrap(), t(1));
        assert!(before_end_time(t(1), t(5), Some(t(6))).is_err());
    }

    #[test]
    fn updates_follow_the_lease_state() {
        let l = lease(5, 8);
        let now = t(1);
        let c = |start: Option<u32>, end: Option<u32>| LeaseChange {
            start: start.map(t),
            end: end.map(t),
            ..Default::default()
        };
        assert_eq!(check_change(&l, &c(Some(4), Some(9)), now).unwrap(), (t(4), t(9)));
        assert!(check_change(&l, &c(None, Some(5)), now).is_err());
        // Started: the start stays, the end may move (not before now).
        let now = t(6);
        assert_eq!(check_change(&l, &c(Some(7), None), now).unwrap_err().code, codes::LEASE_STARTED);
        assert_eq!(check_change(&l, &c(None, Some(10)), now).unwrap(), (t(5), t(10)));
        assert_eq!(check_change(&l, &c(None, Some(5)), now).unwrap_err().code, codes::INVALID_DATE);
        // Ended: only the name.
        let now = t(9);
        assert_eq!(check_change(&l, &c(None, Some(10)), now).unwrap_err().code, codes::LEASE_ENDED);
        let rename = LeaseChange { name: Some("n".into()), ..Default::default() };
        assert!(check_change(&l, &rename, now).is_ok());
    }

    #[test]
    fn reservation_classes_round_trip() {
        let id = Uuid::parse_str("0f6b1a4e-3c2d-4b5a-9e8f-7d6c5b4a3f2e").unwrap();
        let class = reservation_class(id);
        assert_eq!(class, "CUSTOM_RESERVATION_0F6B1A4E_3C2D_4B5A_9E8F_7D6C5B4A3F2E");
        assert!(crate::names::is_custom_name(&class));
        assert_eq!(reservation_of_class(&class), Some(id));
        assert_eq!(reservation_of_class("CUSTOM_GPU"), None);
    }

    #[test]
    fn no_capacity_codes_name_the_reservation() {
        assert_eq!(no_capacity_code(0), "berth.lease.reservation_0.no_capacity");
        assert_eq!(no_capacity_code(31), "berth.lease.reservation_31.no_capacity");
        assert_eq!(no_capacity_code(99), codes::NO_CAPACITY);
    }

    #[test]
    fn occurrences_are_bounded_and_disjoint() {
        let fires = (0..30).map(|d| t(0) + Duration::days(d));
        let occ = occurrences(fires.clone(), t(0), t(0) + Duration::days(3), Duration::hours(2), 100).unwrap();
        assert_eq!(occ.len(), 3);
        assert_eq!(occ[1], (t(0) + Duration::days(1), t(2) + Duration::days(1)));
        assert!(occurrences(fires.clone(), t(0), t(0) + Duration::days(3), Duration::days(2), 100).is_err());
        let e = occurrences(fires.clone(), t(0), t(0) + Duration::days(10), Duration::hours(1), 4).unwrap_err();
        assert_eq!(e.code, codes::TOO_MANY_OCCURRENCES);
        assert!(e.detail.starts_with("recurrence books 10 occurrences, more than the 4"), "{}", e.detail);
        assert!(
            occurrences(fires, t(0) + Duration::days(40), t(0) + Duration::days(50), Duration::hours(1), 9).is_err()
        );
    }

    #[test]
    fn statuses_read_and_write_as_blazar_does() {
        assert_eq!(serde_json::to_value(LeaseStatus::Pending).unwrap(), "PENDING");
        assert_eq!(LeaseStatus::parse("active"), Some(LeaseStatus::Active));
        assert_eq!(serde_json::to_value(LeaseEventStatus::InProgress).unwrap(), "IN_PROGRESS");
        assert_eq!(serde_json::to_value(LeaseEventType::BeforeEndLease).unwrap(), "before_end_lease");
        assert_eq!(ReservationStatus::parse("pending"), Some(ReservationStatus::Pending));
    }
}
