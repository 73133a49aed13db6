//! Offers: windows in which a lease would fit, each at the longest duration
//! asked for that fits and with the most of each count that fits then, and
//! how they are ranked.

use chrono::{DateTime, Duration, Utc};

use crate::error::{Error, ErrorCode};

/// How offers are ranked; each key after the first breaks ties of the
/// ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Earliest start, then longest, then most capacity.
    #[default]
    Earliest,
    /// Longest, then earliest start, then most capacity.
    Longest,
    /// Most capacity, then earliest start, then longest.
    Capacity,
}

impl Order {
    pub fn parse(s: &str) -> Result<Order, Error> {
        match s {
            "earliest" => Ok(Order::Earliest),
            "longest" => Ok(Order::Longest),
            "capacity" => Ok(Order::Capacity),
            _ => Err(Error::invalid(
                ErrorCode::OfferInvalid,
                format!("order {s:?} is not one of earliest, longest, capacity"),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Order::Earliest => "earliest",
            Order::Longest => "longest",
            Order::Capacity => "capacity",
        }
    }
}

/// One window found: its start and end, and per reservation the count it
/// would book (hosts, or instance slots).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub counts: Vec<u32>,
}

impl Found {
    pub fn duration(&self) -> Duration {
        self.end.signed_duration_since(self.start)
    }

    /// Capacity: the sum of the counts (hosts and slots alike).
    pub fn capacity(&self) -> u64 {
        self.counts.iter().map(|c| u64::from(*c)).sum()
    }
}

/// `found` ranked by `order`, the first `limit` of them.
pub fn rank(mut found: Vec<Found>, order: Order, limit: usize) -> Vec<Found> {
    let key = |f: &Found| (f.start, std::cmp::Reverse(f.duration()), std::cmp::Reverse(f.capacity()));
    match order {
        Order::Earliest => found.sort_by_key(key),
        Order::Longest => {
            found.sort_by_key(|f| (std::cmp::Reverse(f.duration()), f.start, std::cmp::Reverse(f.capacity())))
        }
        Order::Capacity => {
            found.sort_by_key(|f| (std::cmp::Reverse(f.capacity()), f.start, std::cmp::Reverse(f.duration())))
        }
    }
    found.truncate(limit);
    found
}

/// The longest `d` in `[lo, hi]` (whole seconds) for which `fits` holds,
/// given that it holds at `lo`: `fits` holds up to some length and not
/// beyond (a longer window only adds instants to fit at).
pub fn longest(lo: Duration, hi: Duration, mut fits: impl FnMut(Duration) -> bool) -> Duration {
    if fits(hi) {
        return hi;
    }
    let (mut lo, mut hi) = (lo.num_seconds(), hi.num_seconds());
    // lo fits, hi does not.
    while hi.saturating_sub(lo) > 1 {
        let mid = lo.saturating_add(hi.saturating_sub(lo) / 2);
        if fits(Duration::seconds(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Duration::seconds(lo)
}

/// The most `n` in `[lo, hi]` for which `fits` holds, given that it holds
/// at `lo` and, past the most that fits, at no larger count.
pub fn most(lo: u32, hi: u32, mut fits: impl FnMut(u32) -> bool) -> u32 {
    if hi <= lo || fits(hi) {
        return hi.max(lo);
    }
    let (mut lo, mut hi) = (lo, hi);
    while hi.saturating_sub(lo) > 1 {
        let mid = lo.saturating_add(hi.saturating_sub(lo) / 2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_and_the_most_are_found_at_the_edge() {
        let d = longest(Duration::seconds(60), Duration::seconds(10_000), |d| d.num_seconds() <= 4321);
        assert_eq!(d, Duration::seconds(4321));
        assert_eq!(longest(Duration::seconds(1), Duration::seconds(9), |_| true), Duration::seconds(9));
        assert_eq!(most(1, 8, |n| n <= 5), 5);
        assert_eq!(most(2, 2, |_| false), 2);
        assert_eq!(most(1, 8, |_| true), 8);
    }

    #[test]
    fn each_order_ranks_by_its_keys() {
        let t = |h: i64| DateTime::<Utc>::UNIX_EPOCH + Duration::hours(h);
        let f = |s: i64, e: i64, n: u32| Found { start: t(s), end: t(e), counts: vec![n] };
        let all = vec![f(2, 3, 3), f(0, 2, 1), f(1, 4, 1), f(0, 1, 2)];
        let starts = |v: Vec<Found>| v.iter().map(|x| (x.start, x.end)).collect::<Vec<_>>();
        assert_eq!(
            starts(rank(all.clone(), Order::Earliest, 9)),
            [(t(0), t(2)), (t(0), t(1)), (t(1), t(4)), (t(2), t(3))]
        );
        assert_eq!(starts(rank(all.clone(), Order::Longest, 2)), [(t(1), t(4)), (t(0), t(2))]);
        assert_eq!(starts(rank(all, Order::Capacity, 9)), [(t(2), t(3)), (t(0), t(1)), (t(0), t(2)), (t(1), t(4))]);
    }
}
