//! Dates as lease clients write them: `now`, Blazar's `YYYY-MM-DD HH:MM`
//! (UTC), Blazar's own output format, and RFC 3339 with an offset; and
//! durations as `30s`, `10m`, `2h`, `3d`, `1w` (a unit is required in text;
//! a JSON number is seconds).

use chrono::{DateTime, Duration, NaiveDateTime, SubsecRound, Utc};

use crate::error::{Error, ErrorCode};
use crate::time;

/// A date as the client gave it: `now` is decided by the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateSpec {
    Now,
    At(DateTime<Utc>),
}

impl DateSpec {
    pub fn resolve(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            DateSpec::Now => now,
            DateSpec::At(t) => t,
        }
    }
}

/// Naive formats, read as UTC: Blazar's input format first, then its output
/// format (so a date read from a lease can be sent back as it is).
const NAIVE_FORMATS: &[&str] =
    &["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%.f"];

/// Parses a date; `field` names it in the error.
pub fn parse_date(field: &str, s: &str) -> Result<DateSpec, Error> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("now") {
        return Ok(DateSpec::Now);
    }
    // chrono's `%Y` also reads signed and longer years (`+262142-12-31`);
    // Blazar's dates, and ours, have four digits.
    let four_digit_year = s.len() > 4 && s.as_bytes()[..4].iter().all(u8::is_ascii_digit) && s.as_bytes()[4] == b'-';
    if four_digit_year {
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            return Ok(DateSpec::At(time::checked(field, t.with_timezone(&Utc).trunc_subsecs(6))?));
        }
        for f in NAIVE_FORMATS {
            if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
                return Ok(DateSpec::At(time::checked(field, t.and_utc().trunc_subsecs(6))?));
            }
        }
    }
    Err(Error::invalid(
        ErrorCode::InvalidDate,
        format!("{field} {s:?} is not a date: use \"now\", \"YYYY-MM-DD HH:MM\" (UTC) or RFC 3339 with an offset"),
    ))
}

/// Blazar's output format, `YYYY-MM-DDTHH:MM:SS.ffffff`, in UTC.
pub fn format_date(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// Parses `30s`, `10m`, `2h`, `3d` or `1w`. A number without a unit is
/// refused: `1` has meant a second to some and a day to others.
pub fn parse_duration(field: &str, s: &str) -> Result<Duration, Error> {
    let bad = || Error::invalid(ErrorCode::Invalid, format!("{field} {s:?} is not a duration (e.g. 30m, 2h, 1d)"));
    let s = s.trim();
    let Some(i) = s.find(|c: char| !c.is_ascii_digit()) else {
        return Err(Error::invalid(ErrorCode::Invalid, format!("{field} {s:?}: give a unit: {s}m, {s}h, {s}d")));
    };
    let (digits, unit) = s.split_at(i);
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "s" | "sec" => n,
        "m" | "min" => n.checked_mul(60).ok_or_else(bad)?,
        "h" => n.checked_mul(3600).ok_or_else(bad)?,
        "d" => n.checked_mul(86_400).ok_or_else(bad)?,
        "w" => n.checked_mul(7 * 86_400).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    seconds(secs).ok_or_else(bad)
}

/// Longest duration Berth reads: a hundred years.
const MAX_SECONDS: i64 = 100 * 365 * 86_400;

fn seconds(secs: i64) -> Option<Duration> {
    (1..=MAX_SECONDS).contains(&secs).then(|| Duration::seconds(secs))
}

/// A duration as JSON: a number of seconds or a string [`parse_duration`] reads.
pub fn duration_from_json(field: &str, v: &serde_json::Value) -> Result<Duration, Error> {
    match v {
        serde_json::Value::Number(n) => n.as_i64().and_then(seconds).ok_or_else(|| {
            Error::invalid(
                ErrorCode::Invalid,
                format!("{field} must be a whole number of seconds from 1 to {MAX_SECONDS}"),
            )
        }),
        serde_json::Value::String(s) => parse_duration(field, s),
        _ => Err(Error::invalid(ErrorCode::Invalid, format!("{field} must be seconds or a string like \"2h\""))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn blazar_and_rfc3339_dates() {
        let t = Utc.with_ymd_and_hms(2030, 5, 6, 7, 8, 0).unwrap();
        assert_eq!(parse_date("start_date", "2030-05-06 07:08").unwrap(), DateSpec::At(t));
        assert_eq!(parse_date("start_date", "2030-05-06T09:08:00+02:00").unwrap(), DateSpec::At(t));
        assert_eq!(parse_date("start_date", "2030-05-06T07:08:00Z").unwrap(), DateSpec::At(t));
        assert_eq!(parse_date("start_date", "now").unwrap(), DateSpec::Now);
        assert_eq!(parse_date("start_date", format_date(t).as_str()).unwrap(), DateSpec::At(t));
        assert!(parse_date("start_date", "tomorrow").is_err());
        assert!(parse_date("start_date", "2030-13-01 00:00").is_err());
        assert_eq!(parse_date("x", "2030-13-01").unwrap_err().code, ErrorCode::InvalidDate);
    }

    #[test]
    fn years_have_four_digits_from_1_to_9999() {
        for bad in [
            "+262142-12-31 00:00",
            "-262143-01-01 00:00",
            "-5000-01-01 00:00",
            "10000-01-01 00:00",
            "0000-01-01 00:00",
            "0001-01-01T00:30:00+01:00",
            "9999-12-31T23:30:00-01:00",
            "+2030-01-01 00:00",
            "2030\u{0}-01-01 00:00",
        ] {
            let e = parse_date("start_date", bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidDate, "{bad}");
        }
        assert!(parse_date("d", "0001-01-01 00:00").is_ok());
        assert!(parse_date("d", "9999-12-31 23:59").is_ok());
    }

    #[test]
    fn output_has_microseconds() {
        let t = Utc.with_ymd_and_hms(2030, 5, 6, 7, 8, 9).unwrap();
        assert_eq!(format_date(t), "2030-05-06T07:08:09.000000");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("d", "90s").unwrap(), Duration::seconds(90));
        assert!(parse_duration("d", "1").unwrap_err().detail.contains("give a unit: 1m, 1h, 1d"));
        assert_eq!(duration_from_json("d", &serde_json::json!(90)).unwrap(), Duration::seconds(90));
        assert!(duration_from_json("d", &serde_json::json!(0)).is_err());
        assert!(duration_from_json("d", &serde_json::json!("90")).is_err());
        assert_eq!(parse_duration("d", "30m").unwrap(), Duration::minutes(30));
        assert_eq!(parse_duration("d", "2h").unwrap(), Duration::hours(2));
        assert_eq!(parse_duration("d", "1d").unwrap(), Duration::days(1));
        assert!(parse_duration("d", "0").is_err());
        assert!(parse_duration("d", "-5m").is_err());
        assert!(parse_duration("d", "5y").is_err());
        assert!(parse_duration("d", "").is_err());
    }
}
