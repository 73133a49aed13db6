//! Recurring leases: their occurrences from a crontab schedule, and the
//! dry run that lists them with whether each fits.

use berth_core::dates::{duration_from_json, DateSpec};
use berth_core::error::{Error, ErrorCode};
use berth_core::lease::{self, Occurrence as Window};
use berth_store::commands::{LeaseDates, NewLease};
use berth_store::Store;
use chrono::{DateTime, Utc};
use croner::Cron;

use super::parse::date_field;
use super::request::{Occurrence, Recurrence};

/// A recurring lease's occurrences: a cron schedule as crontab reads it
/// (five fields, minute to day of week; day of week 0 or 7 is Sunday, 1
/// Monday; names such as `mon-fri`; a day of month and a day of week both
/// restricted match either, as in Vixie cron), in UTC; a duration each;
/// an end; at most `max` of them.
pub(super) fn occurrences(rec: &Recurrence, from: DateTime<Utc>, max: usize) -> Result<Vec<Window>, Error> {
    let bad = |m: String| Error::invalid(ErrorCode::InvalidLease, format!("recurrence: {m}"));
    let expr = rec.cron.as_str();
    if expr.split_whitespace().count() != 5 {
        return Err(bad(format!("cron {expr:?} must have five fields: minute hour day-of-month month day-of-week")));
    }
    let schedule = Cron::new(expr).parse().map_err(|e| bad(format!("cron {expr:?}: {e}")))?;
    let duration = duration_from_json("recurrence.duration", &rec.duration)?;
    let until = match date_field("until", Some(&rec.until))? {
        Some(DateSpec::At(t)) => t,
        _ => return Err(bad("until (a date) is required".into())),
    };
    lease::occurrences(schedule.iter_from(from), from, until, duration, max)
}

/// What `new` would book: each window and whether its reservations fit
/// there now (capacity; quotas are checked when the lease is made).
pub(super) async fn dry_run(store: &Store, new: &NewLease, now: DateTime<Utc>) -> Result<Vec<Occurrence>, Error> {
    let windows = match &new.dates {
        LeaseDates::One { start, end, .. } => vec![(start.resolve(now), end.resolve(now))],
        LeaseDates::Recurring(occ) => occ.clone(),
    };
    let mut out = Vec::with_capacity(windows.len());
    for (start, end) in windows {
        let fits = end > start
            && !store.availability(&new.project_id, &new.reservations, end - start, start, end, 1).await?.is_empty();
        out.push(Occurrence { start, end, fits });
    }
    Ok(out)
}

/// Fuzz target: recurrences as users type them, bounded to a fixed number
/// of cases.
#[cfg(test)]
mod fuzz {
    use super::*;
    use berth_core::dates::format_date;
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

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, max_shrink_time: 10_000, ..ProptestConfig::default() })]

        #[test]
        fn any_recurrence_books_at_most_the_cap_within_its_range_or_is_refused(
            expr in cron(),
            days in 0i64..400,
            hours in 1i64..24,
        ) {
            let from = chrono::DateTime::parse_from_rfc3339("2031-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
            let until = from.plus("until", Duration::days(days)).unwrap();
            let rec = json!({"cron": expr, "duration": format!("{hours}h"), "until": format_date(until)});
            let rec = Recurrence { cron: rec["cron"].as_str().unwrap().into(), duration: rec["duration"].clone(), until: rec["until"].as_str().unwrap().into() };
            match occurrences(&rec, from, 100) {
                Ok(found) => {
                    prop_assert!(found.len() <= 100);
                    for (start, end) in found {
                        prop_assert!(from <= start && start < until && Ok(end) == start.plus("end", Duration::hours(hours)));
                    }
                }
                Err(e) => prop_assert_eq!(e.kind, ErrorKind::Invalid, "{}: {}", expr, e.detail),
            }
        }
    }
}
