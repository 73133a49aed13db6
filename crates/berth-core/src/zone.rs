//! Local wall-clock time in IANA zones (the tz database ships in the
//! binary, through chrono-tz): a zone's name as a client writes it, and
//! the instant a local time means there.
//!
//! A local time names one instant, except twice a year where daylight
//! saving changes. Berth reads those as RFC 5545 (section 3.3.5) does:
//! a local time in a spring-forward gap, which does not exist, is read with
//! the UTC offset in force before the gap (02:30 on the night Paris skips
//! from 02:00 to 03:00 is 03:30 CEST); a local time in a fall-back overlap,
//! which exists twice, is the first (earlier) of the two instants.

use chrono::{DateTime, FixedOffset, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use crate::error::{Error, ErrorCode};

/// The longest zone name read (the longest in the tz database has 32
/// characters).
pub const MAX_ZONE_NAME: usize = 64;

/// The zone a naive date is read in when none is given: Blazar's.
pub const DEFAULT: Tz = Tz::UTC;

/// The zone named `name` (`Europe/Paris`, `UTC`), exactly as the tz
/// database spells it; `field` names it in the error.
pub fn parse_zone(field: &str, name: &str) -> Result<Tz, Error> {
    let shape_ok = !name.is_empty()
        && name.len() <= MAX_ZONE_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'));
    if !shape_ok {
        let shown: String = name.chars().take(MAX_ZONE_NAME).collect();
        return Err(Error::invalid(
            ErrorCode::UnknownTimeZone,
            format!("{field}: {shown:?} is not a time zone name: use an IANA name such as \"Europe/Paris\" or \"UTC\""),
        ));
    }
    name.parse::<Tz>().map_err(|_| {
        Error::invalid(
            ErrorCode::UnknownTimeZone,
            format!("{field}: unknown time zone {name:?}: use an IANA name such as \"Europe/Paris\" or \"UTC\""),
        )
    })
}

/// The instant the local wall-clock time `local` means in `zone`, by
/// RFC 5545's rule (see the module). None only where the instant falls
/// outside what chrono can name.
pub fn instant(zone: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match zone.offset_from_local_datetime(&local) {
        chrono::LocalResult::Single(o) => at_offset(local, o.fix()),
        chrono::LocalResult::Ambiguous(a, b) => {
            let (a, b) = (at_offset(local, a.fix())?, at_offset(local, b.fix())?);
            Some(a.min(b))
        }
        chrono::LocalResult::None => at_offset(local, offset_before_gap(zone, local)),
    }
}

/// The offset in force just before the gap `local` falls in. Reading
/// `local` with the offset after the gap gives an instant before the
/// change, and with the offset before it, one after; so the zone's offsets
/// at `local` read as UTC and at `local` read with that offset are the two,
/// and the one before is the smaller (a gap is a move forward).
fn offset_before_gap(zone: Tz, local: NaiveDateTime) -> FixedOffset {
    let first = zone.offset_from_utc_datetime(&local).fix();
    let second = at_offset(local, first).map(|t| zone.offset_from_utc_datetime(&t.naive_utc()).fix());
    match second {
        Some(second) if second.local_minus_utc() < first.local_minus_utc() => second,
        _ => first,
    }
}

/// `local` read at `offset`.
fn at_offset(local: NaiveDateTime, offset: FixedOffset) -> Option<DateTime<Utc>> {
    offset.from_local_datetime(&local).single().map(|t| t.with_timezone(&Utc))
}

/// The UTC offset `zone` has at `t`.
pub fn offset_at(zone: Tz, t: DateTime<Utc>) -> FixedOffset {
    zone.offset_from_utc_datetime(&t.naive_utc()).fix()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn local(y: i32, m: u32, d: u32, h: u32, min: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, m, d).unwrap().and_hms_opt(h, min, 0).unwrap()
    }

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        local(y, m, d, h, min).and_utc()
    }

    fn zone(name: &str) -> Tz {
        parse_zone("time_zone", name).unwrap()
    }

    #[test]
    fn ordinary_local_times_have_their_offset() {
        assert_eq!(instant(zone("Europe/Paris"), local(2027, 1, 4, 9, 0)), Some(utc(2027, 1, 4, 8, 0)));
        assert_eq!(instant(zone("Europe/Paris"), local(2027, 7, 5, 9, 0)), Some(utc(2027, 7, 5, 7, 0)));
        assert_eq!(instant(zone("UTC"), local(2027, 7, 5, 9, 0)), Some(utc(2027, 7, 5, 9, 0)));
    }

    #[test]
    fn a_time_in_a_spring_forward_gap_keeps_the_offset_before_it() {
        // Paris skips 02:00 to 03:00 CET→CEST on 2027-03-28: 02:30 is 03:30 CEST.
        assert_eq!(instant(zone("Europe/Paris"), local(2027, 3, 28, 2, 30)), Some(utc(2027, 3, 28, 1, 30)));
        // New York skips 02:00 to 03:00 EST→EDT on 2028-03-12.
        assert_eq!(instant(zone("America/New_York"), local(2028, 3, 12, 2, 30)), Some(utc(2028, 3, 12, 7, 30)));
        // Sydney skips 02:00 to 03:00 AEST→AEDT on 2027-10-03.
        assert_eq!(instant(zone("Australia/Sydney"), local(2027, 10, 3, 2, 30)), Some(utc(2027, 10, 2, 16, 30)));
        // Samoa skipped a whole day (30 December 2011), -10 to +14.
        assert_eq!(instant(zone("Pacific/Apia"), local(2011, 12, 30, 12, 0)), Some(utc(2011, 12, 30, 22, 0)));
    }

    #[test]
    fn a_time_in_a_fall_back_overlap_is_the_first_instant() {
        // Paris repeats 02:00 to 03:00 on 2027-10-31: 02:30 CEST first.
        assert_eq!(instant(zone("Europe/Paris"), local(2027, 10, 31, 2, 30)), Some(utc(2027, 10, 31, 0, 30)));
        // New York repeats 01:00 to 02:00 on 2028-11-05: 01:30 EDT first.
        assert_eq!(instant(zone("America/New_York"), local(2028, 11, 5, 1, 30)), Some(utc(2028, 11, 5, 5, 30)));
        // Sydney repeats 02:00 to 03:00 on 2028-04-02: 02:30 AEDT first.
        assert_eq!(instant(zone("Australia/Sydney"), local(2028, 4, 2, 2, 30)), Some(utc(2028, 4, 1, 15, 30)));
    }

    #[test]
    fn zone_names_are_the_tz_databases() {
        assert_eq!(zone("America/Argentina/Buenos_Aires").name(), "America/Argentina/Buenos_Aires");
        assert_eq!(zone("Etc/GMT+5").name(), "Etc/GMT+5");
        let e = parse_zone("time_zone", "Europe/Atlantis").unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownTimeZone);
        assert!(e.detail.contains("unknown time zone \"Europe/Atlantis\""), "{}", e.detail);
        for odd in ["", "Europe/Paris\n", "../../etc/passwd", "Europe Paris", "Éurope/Paris", &"A".repeat(65)] {
            let e = parse_zone("time_zone", odd).unwrap_err();
            assert_eq!(e.code, ErrorCode::UnknownTimeZone, "{odd:?}");
            assert!(e.detail.len() < 200, "{}", e.detail);
        }
    }
}
