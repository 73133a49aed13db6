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

/// The smallest window covering all `holds`; `None` when there are none.
pub fn span(holds: &[(Window, i64)]) -> Option<Window> {
    let start = holds.iter().map(|h| h.0.start).min()?;
    let end = if holds.iter().any(|h| h.0.end.is_none()) { None } else { holds.iter().filter_map(|h| h.0.end).max() };
    Some(Window { start, end })
}

/// Whether a holder may replace its `previous` holds by `new` ones, beside
/// everyone else's `others`, under `limit`: at every instant the total stays
/// within the limit. A request that raises the holder's amount at no instant
/// is allowed even where the limit is already exceeded (after an inventory
/// or limit was lowered): it does not make the overage worse.
pub fn fits(others: &[(Window, i64)], previous: &[(Window, i64)], new: &[(Window, i64)], limit: i64) -> bool {
    let Some(within) = span(new) else {
        return true;
    };
    // Growth over time: new holds count up, previous ones down.
    let growth: Vec<(Window, i64)> = new.iter().copied().chain(previous.iter().map(|(w, u)| (*w, -u))).collect();
    if peak(&growth, &within) <= 0 {
        return true;
    }
    let all: Vec<(Window, i64)> = others.iter().chain(new.iter()).copied().collect();
    peak(&all, &within) <= limit
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
        let others = vec![(w(1, 3), 10)];
        assert!(!fits(&others, &[], &[(w(1, 2), 1)], 10));
        assert!(fits(&others, &[(w(1, 2), 1)], &[(w(1, 2), 1)], 10));
        assert!(fits(&others, &[], &[(w(3, 4), 10)], 10));
    }

    #[test]
    fn shrinking_at_one_time_does_not_excuse_growing_at_another() {
        // The holder had 4 at 1..2 and asks for 3 at 2..3, where the provider is full.
        let others = vec![(w(2, 3), 8)];
        assert!(!fits(&others, &[(w(1, 2), 4)], &[(w(2, 3), 3)], 8));
        // Shrinking in place is always allowed, even when full.
        assert!(fits(&others, &[(w(2, 3), 4)], &[(w(2, 3), 3)], 8));
        // Growing in place counts only the growth.
        assert!(fits(&[(w(2, 3), 4)], &[(w(2, 3), 2)], &[(w(2, 3), 4)], 8));
        assert!(!fits(&[(w(2, 3), 5)], &[(w(2, 3), 2)], &[(w(2, 3), 4)], 8));
    }
}
