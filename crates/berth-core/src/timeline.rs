//! Usage over time: the highest sum of overlapping allocations at any instant
//! of a window, and the fit rule that every capacity and quota check shares.

use chrono::{DateTime, Utc};

use crate::window::Window;

/// The highest total of `holds` at any instant of `within`. Holds that do not
/// overlap `within` are ignored. A sweep over start and end points, O(n log n).
pub fn peak<'a>(holds: impl IntoIterator<Item = &'a (Window, i64)>, within: &Window) -> i64 {
    // (time, delta); ends sort before starts at the same instant, since a
    // window is [start, end): back-to-back holds never add up.
    let mut points: Vec<(DateTime<Utc>, i64)> = Vec::new();
    for (w, used) in holds {
        if !w.overlaps(within) {
            continue;
        }
        let start = w.start.max(within.start);
        points.push((start, *used));
        if let Some(end) = w.end {
            if within.end.is_none_or(|we| end < we) {
                points.push((end, -used));
            }
        }
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut level, mut top) = (0i64, 0i64);
    for (_, delta) in points {
        level += delta;
        top = top.max(level);
    }
    top
}

/// Whether adding `new` over `window` to `others` keeps every instant within
/// `limit`. A request that does not raise the holder's amount (`previous` is
/// what it held before) is allowed even where the limit is already exceeded:
/// it does not make an existing overage worse.
pub fn fits(others: &[(Window, i64)], window: &Window, new: i64, previous: i64, limit: i64) -> bool {
    if new <= previous {
        return true;
    }
    peak(others, window) + new <= limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
    }
    fn w(a: u32, b: u32) -> Window {
        Window::new(t(a), Some(t(b))).unwrap()
    }

    #[test]
    fn peak_counts_only_overlapping_instants() {
        let holds = vec![(w(1, 3), 2), (w(2, 4), 3), (w(4, 6), 5), (Window::from(t(5)), 1)];
        assert_eq!(peak(&holds, &w(0, 10)), 6); // 4..6: 5, then +1 at 5
        assert_eq!(peak(&holds, &w(1, 2)), 2);
        assert_eq!(peak(&holds, &w(2, 3)), 5);
        assert_eq!(peak(&holds, &w(3, 4)), 3);
        assert_eq!(peak(&holds, &w(7, 8)), 1);
        assert_eq!(peak(&holds, &w(0, 1)), 0);
    }

    #[test]
    fn back_to_back_holds_do_not_add_up() {
        let holds = vec![(w(1, 2), 4), (w(2, 3), 4)];
        assert_eq!(peak(&holds, &w(0, 5)), 4);
    }

    #[test]
    fn fit_tolerates_existing_overage_only_when_not_growing() {
        let holds = vec![(w(1, 3), 10)];
        assert!(!fits(&holds, &w(1, 2), 1, 0, 10));
        assert!(fits(&holds, &w(1, 2), 1, 1, 10));
        assert!(fits(&holds, &w(3, 4), 10, 0, 10));
    }
}
