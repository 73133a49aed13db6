//! Checked date arithmetic. Berth's dates lie in years 1 to 9999, the range
//! Blazar's clients read and PostgreSQL stores; a sum that leaves it is an
//! error the caller answers with, never a panic. `+` and `-` on chrono values
//! are linted (`clippy::arithmetic_side_effects`), so sums go through here.

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};

use crate::error::{Error, ErrorCode};

/// The first and last years a date may have.
pub const FIRST_YEAR: i32 = 1;
pub const LAST_YEAR: i32 = 9999;

/// Whether `t` lies in years [`FIRST_YEAR`] to [`LAST_YEAR`].
pub fn in_range(t: DateTime<Utc>) -> bool {
    (FIRST_YEAR..=LAST_YEAR).contains(&t.year())
}

/// The last instant Berth can name: 9999-12-31 23:59:59.999999.
pub fn latest() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(LAST_YEAR, 12, 31, 23, 59, 59)
        .single()
        .and_then(|t| t.with_nanosecond(999_999_000))
        .expect("a valid constant date")
}

/// `t` itself if it is in range, else a 400 that names `field`.
pub fn checked(field: &str, t: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
    if in_range(t) {
        Ok(t)
    } else {
        Err(out_of_range(field))
    }
}

/// The refusal of a date outside years [`FIRST_YEAR`] to [`LAST_YEAR`].
pub fn out_of_range(field: &str) -> Error {
    Error::invalid(ErrorCode::InvalidDate, format!("{field} falls outside years {FIRST_YEAR} to {LAST_YEAR}"))
}

/// Sums and differences of a date and a duration, checked.
pub trait DateMath: Sized {
    /// `self + d`; `field` names the result in the error.
    fn plus(self, field: &str, d: Duration) -> Result<Self, Error>;
    /// `self - d`; `field` names the result in the error.
    fn minus(self, field: &str, d: Duration) -> Result<Self, Error>;
    /// `self + d`, or the nearest end of the range.
    fn saturating_plus(self, d: Duration) -> Self;
    /// `self - d`, or the nearest end of the range.
    fn saturating_minus(self, d: Duration) -> Self;
}

impl DateMath for DateTime<Utc> {
    fn plus(self, field: &str, d: Duration) -> Result<Self, Error> {
        self.checked_add_signed(d).filter(|t| in_range(*t)).ok_or_else(|| out_of_range(field))
    }
    fn minus(self, field: &str, d: Duration) -> Result<Self, Error> {
        self.checked_sub_signed(d).filter(|t| in_range(*t)).ok_or_else(|| out_of_range(field))
    }
    fn saturating_plus(self, d: Duration) -> Self {
        match self.checked_add_signed(d) {
            Some(t) if in_range(t) => t,
            _ if d < Duration::zero() => earliest(),
            _ => latest(),
        }
    }
    fn saturating_minus(self, d: Duration) -> Self {
        match self.checked_sub_signed(d) {
            Some(t) if in_range(t) => t,
            _ if d < Duration::zero() => latest(),
            _ => earliest(),
        }
    }
}

/// The first instant Berth can name: 0001-01-01 00:00.
pub fn earliest() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(FIRST_YEAR, 1, 1, 0, 0, 0).single().expect("a valid constant date")
}

/// `a + b` for durations, or an error naming `field`.
pub fn sum(field: &str, a: Duration, b: Duration) -> Result<Duration, Error> {
    a.checked_add(&b)
        .ok_or_else(|| Error::invalid(ErrorCode::InvalidDate, format!("{field} is longer than a duration can be")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_leave_the_range_as_errors() {
        let end = latest();
        assert_eq!(end.year(), LAST_YEAR);
        assert!(end.plus("end_date", Duration::microseconds(1)).is_err());
        assert_eq!(end.plus("end_date", Duration::days(1)).unwrap_err().code, ErrorCode::InvalidDate);
        assert!(earliest().minus("start", Duration::seconds(1)).is_err());
        assert_eq!(earliest().plus("x", Duration::days(1)).unwrap().day(), 2);
        assert_eq!(end.saturating_plus(Duration::days(365)), end);
        assert_eq!(earliest().saturating_minus(Duration::days(365)), earliest());
        assert_eq!(earliest().saturating_plus(Duration::days(-1)), earliest());
        assert!(end.plus("x", Duration::MAX).is_err());
        assert!(end.minus("x", Duration::MIN).is_err());
        assert!(sum("x", Duration::MAX, Duration::seconds(1)).is_err());
        assert!(checked("x", Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap()).is_err());
        assert!(checked("x", Utc.with_ymd_and_hms(0, 12, 31, 0, 0, 0).unwrap()).is_err());
    }
}
