//! Dates as lease clients write them: `now`, Blazar's `YYYY-MM-DD HH:MM`
//! (UTC), Blazar's own output format, RFC 3339 with an offset, and any of
//! these with an IANA zone in brackets as RFC 9557 writes it
//! (`2027-03-28T09:00[Europe/Paris]`); and durations as `30s`, `10m`, `2h`,
//! `3d`, `1w` (a unit is required in text; a JSON number is seconds).

use chrono::{DateTime, Duration, FixedOffset, NaiveDateTime, SubsecRound, Utc};
use chrono_tz::Tz;

use crate::error::{Error, ErrorCode};
use crate::time;
use crate::zone;

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

/// Parses a date; a naive one is UTC, as in Blazar; `field` names it in the
/// error.
pub fn parse_date(field: &str, s: &str) -> Result<DateSpec, Error> {
    parse_date_in(field, s, zone::DEFAULT)
}

/// Parses a date; a naive one (no offset, no zone) is read in `naive_zone`.
/// A zone in brackets reads the local time there by RFC 5545's rule (see
/// [`zone`]); with an offset too, the offset must be the zone's at that
/// instant (it picks one of the two instants of a fall-back overlap).
pub fn parse_date_in(field: &str, s: &str, naive_zone: Tz) -> Result<DateSpec, Error> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("now") {
        return Ok(DateSpec::Now);
    }
    let (date, bracketed) = match s.split_once('[') {
        Some((date, rest)) => match rest.strip_suffix(']') {
            // RFC 9557's critical flag changes nothing here: the zone is
            // always applied.
            Some(name) => (date, Some(name.strip_prefix('!').unwrap_or(name))),
            None => return Err(not_a_date(field, s)),
        },
        None => (s, None),
    };
    let zone = bracketed.map(|name| zone::parse_zone(field, name)).transpose()?;
    let read = match read_date(date) {
        Some(read) => read,
        None => return Err(not_a_date(field, s)),
    };
    let t = match (read, zone) {
        (Read::Utc(t), _) => t,
        (Read::Offset(t), None) => t.with_timezone(&Utc),
        (Read::Offset(t), Some(zone)) => {
            let t_utc = t.with_timezone(&Utc);
            let theirs = zone::offset_at(zone, t_utc);
            if theirs != *t.offset() {
                return Err(Error::invalid(
                    ErrorCode::InvalidDate,
                    format!(
                        "{field} {s:?}: the offset {} disagrees with {}, which is {theirs} at that time",
                        t.offset(),
                        zone.name()
                    ),
                ));
            }
            t_utc
        }
        (Read::Naive(local), zone) => {
            zone::instant(zone.unwrap_or(naive_zone), local).ok_or_else(|| time::out_of_range(field))?
        }
    };
    Ok(DateSpec::At(time::checked(field, t.trunc_subsecs(6))?))
}

/// A date without its zone, as read.
enum Read {
    /// RFC 3339 with `Z`: an instant, whatever the zone.
    Utc(DateTime<Utc>),
    /// RFC 3339 with a numeric offset.
    Offset(DateTime<FixedOffset>),
    /// No offset: a local time.
    Naive(NaiveDateTime),
}

fn read_date(s: &str) -> Option<Read> {
    // chrono's `%Y` also reads signed and longer years (`+262142-12-31`);
    // Blazar's dates, and ours, have four digits.
    let four_digit_year = s.len() > 4 && s.as_bytes()[..4].iter().all(u8::is_ascii_digit) && s.as_bytes()[4] == b'-';
    if !four_digit_year {
        return None;
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        let zulu = s.ends_with('Z') || s.ends_with('z');
        return Some(if zulu { Read::Utc(t.with_timezone(&Utc)) } else { Read::Offset(t) });
    }
    // RFC 3339 needs seconds; Berth's zoned examples often leave them out.
    if let Ok(t) = DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M%:z") {
        return Some(Read::Offset(t));
    }
    NAIVE_FORMATS.iter().find_map(|f| NaiveDateTime::parse_from_str(s, f).ok()).map(Read::Naive)
}

fn not_a_date(field: &str, s: &str) -> Error {
    Error::invalid(
        ErrorCode::InvalidDate,
        format!(
            "{field} {s:?} is not a date: use \"now\", \"YYYY-MM-DD HH:MM\" (UTC), RFC 3339 with an offset, \
             or either with an IANA zone in brackets (\"2027-03-28T09:00[Europe/Paris]\")"
        ),
    )
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

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_zone_in_brackets_reads_the_local_time_there() {
        let winter = at("2027-01-04T08:00:00Z");
        for s in
            ["2027-01-04T09:00[Europe/Paris]", "2027-01-04 09:00[Europe/Paris]", "2027-01-04T09:00:00[Europe/Paris]"]
        {
            assert_eq!(parse_date("start_date", s).unwrap(), DateSpec::At(winter), "{s}");
        }
        assert_eq!(parse_date("d", "2027-01-04T09:00:00+01:00[Europe/Paris]").unwrap(), DateSpec::At(winter));
        assert_eq!(parse_date("d", "2027-01-04T09:00+01:00[Europe/Paris]").unwrap(), DateSpec::At(winter));
        assert_eq!(parse_date("d", "2027-01-04T09:00[!Europe/Paris]").unwrap(), DateSpec::At(winter));
        // Z fixes the instant; the zone is the reader's.
        assert_eq!(parse_date("d", "2027-01-04T08:00:00Z[Europe/Paris]").unwrap(), DateSpec::At(winter));
        assert_eq!(
            parse_date("d", "2027-07-05 09:00[Europe/Paris]").unwrap(),
            DateSpec::At(at("2027-07-05T07:00:00Z"))
        );
        assert_eq!(parse_date("d", "2027-07-05 09:00[UTC]").unwrap(), DateSpec::At(at("2027-07-05T09:00:00Z")));
    }

    #[test]
    fn a_naive_date_is_read_in_the_zone_given() {
        let paris = crate::zone::parse_zone("time_zone", "Europe/Paris").unwrap();
        let summer = at("2027-07-05T07:00:00Z");
        assert_eq!(parse_date_in("until", "2027-07-05 09:00", paris).unwrap(), DateSpec::At(summer));
        // An offset or a zone of its own wins.
        assert_eq!(parse_date_in("until", "2027-07-05T07:00:00Z", paris).unwrap(), DateSpec::At(summer));
        let ny = "2027-07-05 03:00[America/New_York]";
        assert_eq!(parse_date_in("until", ny, paris).unwrap(), DateSpec::At(summer));
    }

    #[test]
    fn zoned_dates_in_a_gap_or_an_overlap() {
        // Paris skips 02:00-03:00 on 2027-03-28: 02:30 is read with CET, 03:30 CEST.
        assert_eq!(
            parse_date("d", "2027-03-28 02:30[Europe/Paris]").unwrap(),
            DateSpec::At(at("2027-03-28T01:30:00Z"))
        );
        // Paris repeats 02:00-03:00 on 2027-10-31: the first, CEST, unless an offset picks.
        let overlap = "2027-10-31 02:30[Europe/Paris]";
        assert_eq!(parse_date("d", overlap).unwrap(), DateSpec::At(at("2027-10-31T00:30:00Z")));
        let second = "2027-10-31T02:30:00+01:00[Europe/Paris]";
        assert_eq!(parse_date("d", second).unwrap(), DateSpec::At(at("2027-10-31T01:30:00Z")));
        let first = "2027-10-31T02:30:00+02:00[Europe/Paris]";
        assert_eq!(parse_date("d", first).unwrap(), DateSpec::At(at("2027-10-31T00:30:00Z")));
    }

    #[test]
    fn an_offset_the_zone_does_not_have_then_is_refused() {
        let e = parse_date("start_date", "2027-07-05T09:00:00+01:00[Europe/Paris]").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidDate);
        assert!(e.detail.contains("the offset +01:00 disagrees with Europe/Paris, which is +02:00"), "{}", e.detail);
        // A time in the gap has no offset of its own to agree with.
        assert!(parse_date("d", "2027-03-28T02:30:00+01:00[Europe/Paris]").is_err());
    }

    #[test]
    fn unknown_zones_and_odd_brackets_are_refused() {
        let e = parse_date("start_date", "2027-07-05 09:00[Europe/Atlantis]").unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownTimeZone);
        assert!(e.detail.contains("start_date: unknown time zone \"Europe/Atlantis\""), "{}", e.detail);
        let e = parse_date("d", "2027-07-05 09:00[europe/paris]").unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownTimeZone);
        for bad in [
            "2027-07-05 09:00[Europe/Paris",
            "2027-07-05 09:00[Europe/Paris]x",
            "2027-07-05 09:00[Europe/Paris][u-ca=iso8601]",
            "[Europe/Paris]",
            "now[Europe/Paris]",
            "+2027-07-05 09:00[Europe/Paris]",
            "10000-01-01 00:00[Europe/Paris]",
        ] {
            let e = parse_date("d", bad).unwrap_err();
            assert!(matches!(e.code, ErrorCode::InvalidDate | ErrorCode::UnknownTimeZone), "{bad}: {e:?}");
        }
        // The instant, not only the local date, lies in years 1 to 9999.
        assert_eq!(parse_date("d", "9999-12-31 23:30[Etc/GMT+1]").unwrap_err().code, ErrorCode::InvalidDate);
        assert!(parse_date("d", "0001-01-01 00:30[Etc/GMT-1]").is_err());
        assert!(parse_date("d", "0001-01-01 01:30[Etc/GMT-1]").is_ok());
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
