//! The rules a lease's window and name follow: a new lease starts now or
//! later and ends after it starts; an update may not move what has already
//! happened. Pure: callers pass `now` in.

use chrono::{DateTime, Utc};

use super::{LeaseRecord, DEFAULT_BEFORE_END, START_GRACE};
use crate::dates::format_date as fmt;
use crate::error::{Error, ErrorCode};
use crate::time::DateMath;

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
            ErrorCode::InvalidDate,
            format!("start_date {} is in the past (now is {})", fmt(start), fmt(now)),
        ));
    }
    ends_after_start(start, end)
}

/// A window ends after it starts.
fn ends_after_start(start: DateTime<Utc>, end: DateTime<Utc>) -> Result<(), Error> {
    if end <= start {
        return Err(Error::invalid(
            ErrorCode::InvalidDate,
            format!("end_date {} is not after start_date {}", fmt(end), fmt(start)),
        ));
    }
    Ok(())
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
            ErrorCode::InvalidDate,
            format!("before_end_date {} is not between start_date {} and end_date {}", fmt(t), fmt(start), fmt(end)),
        )),
        Some(t) => Ok(t),
        None => Ok(end.saturating_minus(DEFAULT_BEFORE_END).max(start)),
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
            ErrorCode::LeaseEnded,
            format!("lease {} has ended: it can only be renamed", lease.id),
        ));
    }
    if moves_start {
        if lease.has_started(now) {
            return Err(Error::conflict(
                ErrorCode::LeaseStarted,
                format!("lease {} has started: its start_date cannot change", lease.id),
            ));
        }
        let s = change.start.expect("moves_start");
        if s < now.saturating_minus(START_GRACE) {
            return Err(Error::invalid(ErrorCode::InvalidDate, format!("start_date {} is in the past", fmt(s))));
        }
    }
    let start = change.start.unwrap_or(lease.start);
    let end = change.end.unwrap_or(lease.end);
    if moves_end && end < now {
        return Err(Error::invalid(
            ErrorCode::InvalidDate,
            format!("end_date {} is in the past (now is {})", fmt(end), fmt(now)),
        ));
    }
    ends_after_start(start, end)?;
    if let Some(name) = &change.name {
        check_name(name)?;
    }
    Ok((start, end))
}

pub fn check_name(name: &str) -> Result<(), Error> {
    if name.trim().is_empty() || name.chars().count() > 80 {
        return Err(Error::invalid(ErrorCode::InvalidLease, "a lease name is 1 to 80 characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{new_events, LeaseStatus};
    use chrono::{Duration, TimeZone};
    use uuid::Uuid;

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
            time_zone: None,
            reservations: vec![],
            events: new_events(t(start), t(end - 1), t(end)),
        }
    }

    #[test]
    fn new_windows() {
        assert!(check_new_window(t(2), false, t(3), t(1)).is_ok());
        assert_eq!(check_new_window(t(0), false, t(3), t(1)).unwrap_err().code, ErrorCode::InvalidDate);
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
        assert_eq!(check_change(&l, &c(Some(7), None), now).unwrap_err().code, ErrorCode::LeaseStarted);
        assert_eq!(check_change(&l, &c(None, Some(10)), now).unwrap(), (t(5), t(10)));
        assert_eq!(check_change(&l, &c(None, Some(5)), now).unwrap_err().code, ErrorCode::InvalidDate);
        // Ended: only the name.
        let now = t(9);
        assert_eq!(check_change(&l, &c(None, Some(10)), now).unwrap_err().code, ErrorCode::LeaseEnded);
        let rename = LeaseChange { name: Some("n".into()), ..Default::default() };
        assert!(check_change(&l, &rename, now).is_ok());
    }
}
