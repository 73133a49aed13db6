//! A recurring lease's occurrences: each time its schedule fires within the
//! request's span, bounded in number and never overlapping one another.

use chrono::{DateTime, Duration, Utc};

use crate::dates::format_date as fmt;
use crate::error::{Error, ErrorCode};
use crate::time::DateMath;

/// How far past the cap a refused recurrence's occurrences are counted
/// for its error.
const OCCURRENCES_COUNTED: usize = 100_000;

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
                    ErrorCode::InvalidLease,
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
                ErrorCode::TooManyOccurrences,
                format!(
                    "recurrence books {count} occurrences, more than the {max} one request may; bring its end closer"
                ),
            ));
        }
        out.push((t, t.plus("an occurrence's end", duration)?));
    }
    if out.is_empty() {
        return Err(Error::invalid(ErrorCode::InvalidLease, "recurrence: the schedule fires no time before its end"));
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

    #[test]
    fn occurrences_are_bounded_and_disjoint() {
        let fires = (0..30).map(|d| t(0) + Duration::days(d));
        let occ = occurrences(fires.clone(), t(0), t(0) + Duration::days(3), Duration::hours(2), 100).unwrap();
        assert_eq!(occ.len(), 3);
        assert_eq!(occ[1], (t(0) + Duration::days(1), t(2) + Duration::days(1)));
        assert!(occurrences(fires.clone(), t(0), t(0) + Duration::days(3), Duration::days(2), 100).is_err());
        let e = occurrences(fires.clone(), t(0), t(0) + Duration::days(10), Duration::hours(1), 4).unwrap_err();
        assert_eq!(e.code, ErrorCode::TooManyOccurrences);
        assert!(e.detail.starts_with("recurrence books 10 occurrences, more than the 4"), "{}", e.detail);
        assert!(
            occurrences(fires, t(0) + Duration::days(40), t(0) + Duration::days(50), Duration::hours(1), 9).is_err()
        );
    }
}
