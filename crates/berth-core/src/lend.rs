//! Lending idle capacity: the arithmetic of loans, on one provider and class.
//!
//! A **loan** is a preemptible consumer's hold. It never stands in an
//! owner's way: it is lent only up to the first instant it would not fit,
//! less the reclaim lead, and a command that later needs the capacity cuts
//! it short (the manager then reclaims it through the plugins).
//!
//! At every instant `t`, with `ordinary(t)` every hold but the loans and the
//! idle holds lent out, `lendable(t)` what the owners who allow it hold
//! reserved and unconsumed, and `lent(t)` the loans:
//!
//! ```text
//! ordinary(t) + max(lendable(t), lent(t)) <= capacity
//! ```
//!
//! Loans fill the lendable holds first and free capacity after. Without
//! loans this is the rule every other command keeps (loans are invisible to
//! them), so they may only ever break it by taking capacity a loan sits on;
//! [`cuts`] restores it.

use chrono::{DateTime, Duration, Utc};

use crate::time::DateMath;
use crate::window::Window;

/// Holds on one provider and class: (window, amount).
pub type Holds = [(Window, i64)];

/// The instants at which any hold starts or ends, from `from` on, sorted.
fn edges(from: DateTime<Utc>, all: &[&Holds]) -> Vec<DateTime<Utc>> {
    let mut at: Vec<DateTime<Utc>> = vec![from];
    for holds in all {
        for (w, _) in holds.iter() {
            at.extend([Some(w.start), w.end].into_iter().flatten().filter(|t| *t > from));
        }
    }
    at.sort();
    at.dedup();
    at
}

fn sum_at(holds: &Holds, t: DateTime<Utc>) -> i64 {
    holds.iter().filter(|(w, _)| w.contains(t)).map(|(_, n)| n).sum()
}

/// The first instant from `from` on at which the rule breaks, if one does.
pub fn first_overflow(
    capacity: i64,
    ordinary: &Holds,
    lendable: &Holds,
    lent: &Holds,
    from: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    // The sums are constant between edges: checking each edge checks all.
    edges(from, &[ordinary, lendable, lent])
        .into_iter()
        .find(|t| sum_at(ordinary, *t) + sum_at(lendable, *t).max(sum_at(lent, *t)) > capacity)
}

/// Until when a new loan of `amount` from `now` may run: the first instant
/// it would break the rule, less `lead`; `None` (open-ended) when it never
/// would. `Err(())` when that leaves nothing: the capacity is needed within
/// the lead, or is not there now.
#[allow(clippy::result_unit_err)]
pub fn lend_until(
    capacity: i64,
    ordinary: &Holds,
    lendable: &Holds,
    lent: &Holds,
    amount: i64,
    now: DateTime<Utc>,
    lead: Duration,
) -> Result<Option<DateTime<Utc>>, ()> {
    let mut with: Vec<(Window, i64)> = lent.to_vec();
    with.push((Window::from(now), amount));
    match first_overflow(capacity, ordinary, lendable, &with, now) {
        None => Ok(None),
        Some(t) if t.saturating_minus(lead) > now => Ok(Some(t.saturating_minus(lead))),
        Some(_) => Err(()),
    }
}

/// A loan as [`cuts`] sees it: its key, its window, how much it holds,
/// and the lead it was lent with.
#[derive(Debug, Clone, PartialEq)]
pub struct Loan<K> {
    pub key: K,
    pub window: Window,
    pub used: i64,
    pub lead: Duration,
}

/// The loans to cut short so the rule holds again from `now` on, each with
/// its new end: at each instant where the rule breaks, the loans running
/// then end their lead before it (never before `now`), the newest first (the
/// last lent is the first reclaimed), until the rule holds there. `loans`
/// are in the order they were lent. A loan that runs past several
/// breaks is cut once, at the earliest.
pub fn cuts<K: Clone + PartialEq>(
    capacity: i64,
    ordinary: &Holds,
    lendable: &Holds,
    loans: &[Loan<K>],
    now: DateTime<Utc>,
) -> Vec<(K, DateTime<Utc>)> {
    let mut loans: Vec<Loan<K>> = loans.to_vec();
    let mut out: Vec<(K, DateTime<Utc>)> = Vec::new();
    loop {
        let lent: Vec<(Window, i64)> = loans.iter().map(|l| (l.window, l.used)).collect();
        let Some(t) = first_overflow(capacity, ordinary, lendable, &lent, now) else {
            return out;
        };
        // The newest loan running at t.
        let Some(i) = loans.iter().rposition(|l| l.window.contains(t)) else {
            // Nothing lent runs then: the break is not the loans' doing.
            return out;
        };
        let loan = &mut loans[i];
        // A loan cut to before its start (it was lent in the future) runs not at all.
        let end = t.saturating_minus(loan.lead).max(now).max(loan.window.start);
        // It no longer runs at t, and no break comes before t: it is not cut again.
        loan.window.end = Some(end);
        out.push((loan.key.clone(), end));
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, clippy::arithmetic_side_effects)] // fixed instants, small sums
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap() + Duration::hours(h)
    }
    fn w(s: i64, e: Option<i64>) -> Window {
        Window { start: at(s), end: e.map(at) }
    }

    #[test]
    fn a_loan_ends_the_lead_before_a_reservation_that_needs_the_host() {
        // A host of 1, reserved from hour 24 to 48.
        let ordinary = [(w(24, Some(48)), 1)];
        let until = lend_until(1, &ordinary, &[], &[], 1, at(0), Duration::hours(1));
        assert_eq!(until, Ok(Some(at(23))));
        // Within the lead of the reservation: nothing to lend.
        assert_eq!(lend_until(1, &ordinary, &[], &[], 1, at(23), Duration::hours(1)), Err(()));
        // A free host lends open-ended.
        assert_eq!(lend_until(1, &[], &[], &[], 1, at(0), Duration::hours(1)), Ok(None));
    }

    #[test]
    fn loans_fill_what_owners_lend_before_free_capacity() {
        // Capacity 4: 2 held by others, 2 reserved and lendable.
        let ordinary = [(w(0, None), 2)];
        let lendable = [(w(0, Some(10)), 2)];
        assert_eq!(lend_until(4, &ordinary, &lendable, &[], 2, at(0), Duration::zero()), Ok(None));
        // A third unit is there neither lent nor free.
        assert_eq!(lend_until(4, &ordinary, &lendable, &[(w(0, None), 2)], 1, at(0), Duration::zero()), Err(()));
    }

    #[test]
    fn an_owner_taking_back_cuts_the_newest_loans_first() {
        let lead = Duration::hours(1);
        let loans = [
            Loan { key: 'a', window: w(0, None), used: 1, lead },
            Loan { key: 'b', window: w(0, None), used: 1, lead },
        ];
        // A host of 2 that a new reservation takes 1 of from hour 5.
        let ordinary = [(w(5, Some(9)), 1)];
        let cut = cuts(2, &ordinary, &[], &loans, at(0));
        assert_eq!(cut, vec![('b', at(4))]);
        // Needed now: cut now, however long the lead.
        let ordinary = [(w(0, None), 2)];
        let cut = cuts(2, &ordinary, &[], &loans, at(0));
        assert_eq!(cut, vec![('b', at(0)), ('a', at(0))]);
    }

    /// A small seeded generator: the same cases every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }

        /// `k` holds of 1 or 2 within the first 30 hours, a quarter open-ended.
        fn holds(&mut self, k: u64) -> Vec<(Window, i64)> {
            (0..k)
                .map(|_| {
                    let s = self.below(20) as i64;
                    let e = if self.below(4) == 0 { None } else { Some(s + 1 + self.below(10) as i64) };
                    (w(s, e), 1 + self.below(2) as i64)
                })
                .collect()
        }
    }

    /// Brute force: after the cuts the rule holds at every hour, and every
    /// cut only shortens a loan.
    #[test]
    fn cuts_restore_the_rule_at_every_instant_and_only_shorten_loans() {
        let mut rng = Rng(0x5eed);
        for _ in 0..2000 {
            let capacity = 1 + rng.below(4) as i64;
            let n = rng.below(3);
            let ordinary = rng.holds(n);
            let n = rng.below(2);
            let lendable = rng.holds(n);
            let lead = Duration::hours(rng.below(3) as i64);
            let n = rng.below(4);
            let loans: Vec<Loan<usize>> = rng
                .holds(n)
                .into_iter()
                .enumerate()
                .map(|(key, (window, used))| Loan { key, window: Window { start: at(0), ..window }, used, lead })
                .collect();
            if first_overflow(capacity, &ordinary, &lendable, &[], at(0)).is_some() {
                continue; // not the loans' doing: nothing to check of them
            }
            let cut = cuts(capacity, &ordinary, &lendable, &loans, at(0));
            let after: Vec<(Window, i64)> = loans
                .iter()
                .map(|l| match cut.iter().find(|(k, _)| *k == l.key) {
                    Some((_, end)) => (Window { start: l.window.start, end: Some(*end) }, l.used),
                    None => (l.window, l.used),
                })
                .collect();
            for h in 0..40 {
                let t = at(h);
                let used = sum_at(&ordinary, t) + sum_at(&lendable, t).max(sum_at(&after, t));
                assert!(used <= capacity, "over capacity at hour {h} after cuts {cut:?}");
            }
            for (k, end) in &cut {
                let l = loans.iter().find(|l| l.key == *k).unwrap();
                assert!(*end >= at(0) && l.window.end.is_none_or(|e| *end < e), "a cut ends a loan earlier");
            }
        }
    }
}
