//! Recurring leases: their occurrences from a crontab schedule, and the
//! dry run that lists them with whether each fits.

use berth_core::dates::{duration_from_json, parse_date_in, DateSpec};
use berth_core::error::{Error, ErrorCode};
use berth_core::lease::{self, Occurrence as Window};
use berth_core::zone;
use berth_store::commands::{LeaseDates, NewLease};
use berth_store::Store;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use super::request::{Occurrence, Recurrence};

/// The zone a recurrence's schedule is read in, as it named it (None: it
/// named none, and UTC is meant).
pub(super) fn zone_of(rec: &Recurrence) -> Result<Option<Tz>, Error> {
    rec.time_zone.as_deref().map(|name| zone::parse_zone("recurrence.time_zone", name)).transpose()
}

/// A recurring lease's occurrences: a cron schedule as crontab reads it
/// (five fields, minute to day of week; day of week 0 or 7 is Sunday, 1
/// Monday; names such as `mon-fri`; a day of month and a day of week both
/// restricted match either, as in Vixie cron), at local wall-clock times in
/// its zone (UTC unless named); a duration each, in absolute time; an end;
/// at most `max` of them.
///
/// A local time the zone skips (spring forward) is read with the offset in
/// force before the skip; one it repeats (fall back) is the first instant,
/// and fires once (RFC 5545, 3.3.5: see [`zone`]).
pub(super) fn occurrences(rec: &Recurrence, from: DateTime<Utc>, max: usize) -> Result<Vec<Window>, Error> {
    let bad = |m: String| Error::invalid(ErrorCode::InvalidLease, format!("recurrence: {m}"));
    let expr = rec.cron.as_str();
    if expr.split_whitespace().count() != 5 {
        return Err(bad(format!("cron {expr:?} must have five fields: minute hour day-of-month month day-of-week")));
    }
    let schedule = Cron::new(expr).parse().map_err(|e| bad(format!("cron {expr:?}: {e}")))?;
    let duration = duration_from_json("recurrence.duration", &rec.duration)?;
    let zone = zone_of(rec)?.unwrap_or(zone::DEFAULT);
    let until = match parse_date_in("until", &rec.until, zone)? {
        DateSpec::At(t) => t,
        DateSpec::Now => return Err(bad("until (a date) is required".into())),
    };
    // croner walks the local wall-clock times, written as UTC times (which
    // no daylight saving moves): each time the schedule names comes once,
    // and is then read as the instant it is in the zone.
    let local_from = from.with_timezone(&zone).naive_local().and_utc();
    let fires = schedule.iter_from(local_from).map_while(|local| zone::instant(zone, local.naive_utc()));
    lease::occurrences(fires, from, until, duration, max)
}

/// What `new` would book: each window and whether its reservations fit
/// there now (capacity; quotas are checked when the lease is made).
pub(super) async fn dry_run(store: &Store, new: &NewLease, now: DateTime<Utc>) -> Result<Vec<Occurrence>, Error> {
    let windows = match &new.dates {
        LeaseDates::One { start, end, .. } => vec![(start.resolve(now), end.resolve(now))],
        LeaseDates::Recurring { occurrences: occ, .. } => occ.clone(),
    };
    let mut out = Vec::with_capacity(windows.len());
    for (start, end) in windows {
        let fits = end > start
            && !store.availability(&new.project_id, &new.reservations, end - start, start, end, 1).await?.is_empty();
        out.push(Occurrence { start, end, fits });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, NaiveDate, NaiveTime, Timelike};

    fn rec(cron: &str, duration: &str, until: &str, zone: Option<&str>) -> Recurrence {
        Recurrence {
            cron: cron.into(),
            duration: duration.into(),
            until: until.into(),
            time_zone: zone.map(str::to_string),
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn tz(name: &str) -> Tz {
        zone::parse_zone("time_zone", name).unwrap()
    }

    fn starts(r: &Recurrence, from: &str) -> Vec<DateTime<Utc>> {
        occurrences(r, at(from), 2000).unwrap().into_iter().map(|(s, _)| s).collect()
    }

    /// Each start's local wall-clock time in `zone`.
    fn local_times(starts: &[DateTime<Utc>], zone: &str) -> Vec<String> {
        starts.iter().map(|t| t.with_timezone(&tz(zone)).format("%m-%d %H:%M").to_string()).collect()
    }

    #[test]
    fn a_weekly_class_keeps_its_local_time_across_daylight_saving() {
        let r = rec("0 9 * * 1", "1h", "2029-01-01 00:00", Some("Europe/Paris"));
        let found = starts(&r, "2027-01-01T00:00:00Z");
        for (t, utc) in [
            ("2027-03-22T08:00:00Z", true),
            ("2027-03-29T07:00:00Z", true),
            ("2027-10-25T07:00:00Z", true),
            ("2027-11-01T08:00:00Z", true),
            ("2028-03-20T08:00:00Z", true),
            ("2028-03-27T07:00:00Z", true),
            ("2028-10-23T07:00:00Z", true),
            ("2028-10-30T08:00:00Z", true),
            ("2027-03-29T08:00:00Z", false),
        ] {
            assert_eq!(found.contains(&at(t)), utc, "{t}");
        }
        // The same schedule in UTC does not move.
        let r = rec("0 9 * * 1", "1h", "2027-12-31 00:00", None);
        assert!(starts(&r, "2027-01-01T00:00:00Z").iter().all(|t| t.hour() == 9));
    }

    #[test]
    fn every_occurrence_is_at_its_local_time_in_2027_and_2028() {
        // (zone, the days of its four changes, its UTC hour for 09:00 before each)
        let zones = [
            ("Europe/Paris", ["2027-03-28", "2027-10-31", "2028-03-26", "2028-10-29"], [8, 7, 8, 7]),
            ("America/New_York", ["2027-03-14", "2027-11-07", "2028-03-12", "2028-11-05"], [14, 13, 14, 13]),
            ("Australia/Sydney", ["2027-04-04", "2027-10-03", "2028-04-02", "2028-10-01"], [22, 23, 22, 23]),
        ];
        for (zone, changes, hours) in zones {
            let r = rec("0 9 * * *", "2h", "2029-01-01 00:00", Some(zone));
            let new_year = NaiveDate::from_ymd_opt(2027, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap();
            let found = occurrences(&r, zone::instant(tz(zone), new_year).unwrap(), 2000).unwrap();
            let found: Vec<_> = found.into_iter().map(|(s, _)| s).collect();
            assert_eq!(found.len(), 731, "{zone}: one a day");
            let nine = NaiveTime::from_hms_opt(9, 0, 0).unwrap();
            assert!(found.iter().all(|t| t.with_timezone(&tz(zone)).time() == nine), "{zone}");
            for (day, hour) in changes.iter().zip(hours) {
                // The day before a change, 09:00 has the old offset; the
                // day after, the new one (Sydney's 09:00 is the day before in UTC).
                let local_day = |t: &&DateTime<Utc>| t.with_timezone(&tz(zone)).format("%F").to_string();
                let last_before = found.iter().rfind(|t| local_day(t).as_str() < *day);
                assert_eq!(last_before.unwrap().hour(), hour, "{zone} before {day}");
                let first_after = found.iter().find(|t| local_day(t).as_str() >= *day);
                assert_ne!(first_after.unwrap().hour(), hour, "{zone} from {day}");
            }
        }
    }

    #[test]
    fn a_local_time_the_zone_skips_is_read_with_the_offset_before() {
        // Paris skips 02:00-03:00 on 2027-03-28: 02:30 that night is 03:30 CEST.
        let r = rec("30 2 * * *", "1h", "2027-03-30 00:00", Some("Europe/Paris"));
        let found = starts(&r, "2027-03-26T00:00:00Z");
        assert_eq!(local_times(&found, "Europe/Paris"), ["03-26 02:30", "03-27 02:30", "03-28 03:30", "03-29 02:30"]);
        assert_eq!(found[2], at("2027-03-28T01:30:00Z"));
        // New York skips 02:00-03:00 on 2028-03-12; Sydney on 2027-10-03.
        let r = rec("30 2 * * *", "1h", "2028-03-14 00:00", Some("America/New_York"));
        let found = starts(&r, "2028-03-11T00:00:00Z");
        assert_eq!(local_times(&found, "America/New_York"), ["03-11 02:30", "03-12 03:30", "03-13 02:30"]);
        let r = rec("30 2 * * *", "1h", "2027-10-05 00:00", Some("Australia/Sydney"));
        let found = starts(&r, "2027-09-30T12:00:00Z");
        assert_eq!(
            local_times(&found, "Australia/Sydney"),
            ["10-01 02:30", "10-02 02:30", "10-03 03:30", "10-04 02:30"]
        );
    }

    #[test]
    fn a_local_time_the_zone_repeats_fires_once_at_the_first_instant() {
        // Sydney repeats 02:00-03:00 on 2028-04-02: 02:30 AEDT (+11), once.
        let r = rec("30 2 * * *", "1h", "2028-04-04 00:00", Some("Australia/Sydney"));
        let found = starts(&r, "2028-03-31T00:00:00Z");
        assert_eq!(local_times(&found, "Australia/Sydney"), ["04-01 02:30", "04-02 02:30", "04-03 02:30"]);
        assert_eq!(found[1], at("2028-04-01T15:30:00Z"));
        // New York repeats 01:00-02:00 on 2028-11-05: 01:30 EDT (-4), once.
        let r = rec("30 1 * * *", "1h", "2028-11-07 00:00", Some("America/New_York"));
        let found = starts(&r, "2028-11-04T00:00:00Z");
        assert_eq!(found, [at("2028-11-04T05:30:00Z"), at("2028-11-05T05:30:00Z"), at("2028-11-06T06:30:00Z")]);
        // Hourly in Paris on 2027-10-31: 24 a local day of 25 hours, 02:00 once.
        let r = rec("0 * * * *", "30m", "2027-11-01 00:00", Some("Europe/Paris"));
        let found = starts(&r, "2027-10-30T22:00:00Z");
        assert_eq!(found.len(), 24);
        assert!(found.contains(&at("2027-10-31T00:00:00Z")) && !found.contains(&at("2027-10-31T01:00:00Z")));
    }

    #[test]
    fn occurrences_that_overlap_in_absolute_time_are_refused() {
        // 03:00 daily for 23h30 (1410m): 24h apart in local time, but 23h across
        // the night Paris springs forward.
        let paris = rec("0 3 * * *", "1410m", "2027-04-02 00:00", Some("Europe/Paris"));
        let e = occurrences(&paris, at("2027-03-20T00:00:00Z"), 100).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidLease);
        assert!(e.detail.contains("2027-03-27T02:00:00.000000 and 2027-03-28T01:00:00.000000 overlap"), "{}", e.detail);
        let utc = rec("0 3 * * *", "1410m", "2027-04-02 00:00", None);
        assert_eq!(occurrences(&utc, at("2027-03-20T00:00:00Z"), 100).unwrap().len(), 13);
        // Times in the skipped hour land on the schedule's own later ones.
        let half_hourly = rec("0,30 1-4 * * *", "10m", "2027-03-29 00:00", Some("Europe/Paris"));
        assert!(occurrences(&half_hourly, at("2027-03-27T12:00:00Z"), 100).unwrap_err().detail.contains("overlap"));
    }

    #[test]
    fn a_naive_until_is_read_in_the_zone() {
        let until = |u: &str| rec("0 9 * * *", "1h", u, Some("Europe/Paris"));
        let last = |r: &Recurrence| *starts(r, "2027-07-01T00:00:00Z").last().unwrap();
        assert_eq!(last(&until("2027-07-05 09:00")), at("2027-07-04T07:00:00Z"));
        assert_eq!(last(&until("2027-07-05 09:01")), at("2027-07-05T07:00:00Z"));
        assert_eq!(last(&until("2027-07-05T07:00:00Z")), at("2027-07-04T07:00:00Z"));
    }

    #[test]
    fn an_unknown_zone_is_refused_naming_it() {
        let e = occurrences(&rec("0 9 * * *", "1h", "2027-07-05", Some("Mars/Olympus")), at("2027-07-01T00:00:00Z"), 9)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownTimeZone);
        assert!(e.detail.contains("recurrence.time_zone: unknown time zone \"Mars/Olympus\""), "{}", e.detail);
    }

    #[test]
    fn each_local_day_is_one_day_apart_in_the_zone() {
        // A sanity check of the walk itself: a daily schedule never skips a day.
        let r = rec("15 23 * * *", "1h", "2028-12-31 00:00", Some("Australia/Sydney"));
        let found = starts(&r, "2027-01-01T00:00:00Z");
        for w in found.windows(2) {
            let (a, b) = (w[0].with_timezone(&tz("Australia/Sydney")), w[1].with_timezone(&tz("Australia/Sydney")));
            assert_eq!(b.date_naive() - a.date_naive(), Duration::days(1));
        }
    }
}

/// Fuzz target: recurrences as users type them, bounded to a fixed number
/// of cases.
#[cfg(test)]
mod fuzz {
    use super::*;
    use berth_core::error::ErrorKind;
    use berth_core::time::DateMath;
    use chrono::Duration;
    use proptest::prelude::*;
    use serde_json::json;

    /// One crontab field: numbers in and out of range, names, ranges,
    /// steps, lists, and Quartz's extensions crontab lacks.
    fn field() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            Just("*".to_string()),
            (0u32..100).prop_map(|n| n.to_string()),
            prop::sample::select(vec!["mon", "FRI", "sun", "jan", "dec", "L", "?", "W", "5#2", "-1"])
                .prop_map(str::to_string),
        ];
        let part = (atom.clone(), prop::option::of(atom), prop::option::of(0u32..70)).prop_map(|(a, b, step)| {
            let mut s = a;
            if let Some(b) = b {
                s = format!("{s}-{b}");
            }
            if let Some(step) = step {
                s = format!("{s}/{step}");
            }
            s
        });
        prop::collection::vec(part, 1..4).prop_map(|parts| parts.join(","))
    }

    fn cron() -> impl Strategy<Value = String> {
        let pick = |xs: &[&'static str]| prop::sample::select(xs.to_vec());
        // Mostly valid: one firing a day at most, so that most are booked.
        let usual = (
            0u32..60,
            0u32..24,
            pick(&["*", "1", "15", "31", "1-10", "*/2", "1,15"]),
            pick(&["*", "1-12", "jan", "feb,mar", "*/3", "2"]),
            pick(&["*", "0", "7", "1", "mon-fri", "sat,sun", "1-5/2", "SUN"]),
        )
            .prop_map(|(m, h, dom, mon, dow)| format!("{m} {h} {dom} {mon} {dow}"));
        prop_oneof![
            usual,
            prop::collection::vec(field(), 5).prop_map(|f| f.join(" ")),
            prop::collection::vec(field(), 0..8).prop_map(|f| f.join(" ")),
            any::<String>(),
        ]
    }

    /// Zones with and without daylight saving, Lord Howe's of half an hour,
    /// and St John's half-hour offset.
    const ZONES: &[&str] =
        &["UTC", "Europe/Paris", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "America/St_Johns"];

    /// Whether `expr` names the local wall-clock time `local`.
    fn names(expr: &str, local: chrono::NaiveDateTime) -> bool {
        let schedule = Cron::new(expr).parse().unwrap();
        schedule.is_time_matching(&local.and_utc()).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, max_shrink_time: 10_000, ..ProptestConfig::default() })]

        #[test]
        fn any_recurrence_books_at_most_the_cap_within_its_range_or_is_refused(
            expr in cron(),
            days in 0i64..400,
            hours in 1i64..24,
            zone_name in prop::sample::select(ZONES),
        ) {
            let from = chrono::DateTime::parse_from_rfc3339("2031-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
            let until = from.plus("until", Duration::days(days)).unwrap();
            let rec = json!({"cron": expr, "duration": format!("{hours}h"), "until": until.to_rfc3339()});
            let rec = Recurrence {
                cron: rec["cron"].as_str().unwrap().into(),
                duration: rec["duration"].clone(),
                until: rec["until"].as_str().unwrap().into(),
                time_zone: Some(zone_name.to_string()),
            };
            let zone = zone::parse_zone("time_zone", zone_name).unwrap();
            match occurrences(&rec, from, 100) {
                Ok(found) => {
                    prop_assert!(found.len() <= 100);
                    for (start, end) in found {
                        prop_assert!(from <= start && start < until && Ok(end) == start.plus("end", Duration::hours(hours)));
                        // At a local time the schedule names; or, where that
                        // time is skipped, as much later as the skip is long.
                        let local = start.with_timezone(&zone).naive_local();
                        if !names(&expr, local) {
                            let day_before = start.plus("day before", Duration::days(-1)).unwrap();
                            let skip = zone::offset_at(zone, start).local_minus_utc()
                                - zone::offset_at(zone, day_before).local_minus_utc();
                            prop_assert!(skip > 0, "{} at {} in {}: not named, and no skip", expr, start, zone_name);
                            let named = local - Duration::seconds(skip.into());
                            prop_assert!(names(&expr, named), "{} at {} in {}", expr, start, zone_name);
                            prop_assert!(chrono::TimeZone::from_local_datetime(&zone, &named).earliest().is_none());
                        }
                    }
                }
                Err(e) => prop_assert_eq!(e.kind, ErrorKind::Invalid, "{}: {}", expr, e.detail),
            }
        }
    }
}
