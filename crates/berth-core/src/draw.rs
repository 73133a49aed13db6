//! Drawing from a reservation's hold: the arithmetic, apart from where the
//! holds are read and written.
//!
//! A consumer that names a reservation's class takes what it asks, class by
//! class, from what the reservation's slots hold on the provider, slot after
//! slot; whatever they cannot give comes from free capacity. Replacing or
//! deleting the consumer's allocations gives the draw back first. On the
//! reservation's provider the consumer's holds end with the lease.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use crate::time::DateMath;
use crate::Window;

/// Amounts by resource class.
pub type Amounts = BTreeMap<String, i64>;

/// Takes from `held` what `want` asks, class by class, as much as `held`
/// has; lowers both by what was taken and answers it (classes taken from
/// only).
pub fn take(want: &mut Amounts, held: &mut Amounts) -> Amounts {
    let mut took = Amounts::new();
    for (class, n) in want.iter_mut() {
        let Some(have) = held.get_mut(class) else { continue };
        let taken = (*n).min(*have);
        if taken > 0 {
            *n -= taken;
            *have -= taken;
            took.insert(class.clone(), taken);
        }
    }
    took
}

/// Gives what was drawn back to what a slot holds.
pub fn give_back(held: &mut Amounts, drawn: &Amounts) {
    for (class, n) in drawn {
        *held.entry(class.clone()).or_default() += n;
    }
}

/// Adds `more` to `into`, class by class.
pub fn add(into: &mut Amounts, more: Amounts) {
    for (class, n) in more {
        *into.entry(class).or_default() += n;
    }
}

/// A drawing consumer's window on the reservation's provider: it ends when
/// the lease does (or before, if it asked to), and starts no later than
/// just before that end, so it is never empty.
pub fn ending_with_lease(window: Window, lease_end: DateTime<Utc>) -> Window {
    let end = window.end.map_or(lease_end, |e| e.min(lease_end));
    Window { start: window.start.min(end.saturating_minus(Duration::microseconds(1))), end: Some(end) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(pairs: &[(&str, i64)]) -> Amounts {
        pairs.iter().map(|(c, n)| (c.to_string(), *n)).collect()
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_draw_takes_what_the_slot_holds_and_leaves_the_rest_asked() {
        let mut want = amounts(&[("VCPU", 4), ("MEMORY_MB", 1024), ("DISK_GB", 10)]);
        let mut held = amounts(&[("VCPU", 2), ("MEMORY_MB", 4096)]);
        let took = take(&mut want, &mut held);
        assert_eq!(took, amounts(&[("VCPU", 2), ("MEMORY_MB", 1024)]));
        assert_eq!(want, amounts(&[("VCPU", 2), ("MEMORY_MB", 0), ("DISK_GB", 10)]));
        assert_eq!(held, amounts(&[("VCPU", 0), ("MEMORY_MB", 3072)]));
    }

    #[test]
    fn an_empty_slot_gives_nothing_and_records_no_class() {
        let mut want = amounts(&[("VCPU", 1)]);
        let mut held = amounts(&[("VCPU", 0)]);
        assert!(take(&mut want, &mut held).is_empty());
        assert_eq!(want, amounts(&[("VCPU", 1)]));
        assert!(take(&mut want, &mut Amounts::new()).is_empty());
    }

    #[test]
    fn slots_are_drawn_in_turn() {
        let mut want = amounts(&[("VCPU", 5)]);
        let (mut a, mut b) = (amounts(&[("VCPU", 3)]), amounts(&[("VCPU", 3)]));
        assert_eq!(take(&mut want, &mut a), amounts(&[("VCPU", 3)]));
        assert_eq!(take(&mut want, &mut b), amounts(&[("VCPU", 2)]));
        assert_eq!((a["VCPU"], b["VCPU"], want["VCPU"]), (0, 1, 0));
    }

    #[test]
    fn giving_back_restores_what_was_drawn() {
        let mut held = amounts(&[("VCPU", 1)]);
        let mut want = amounts(&[("VCPU", 1)]);
        let took = take(&mut want, &mut held);
        give_back(&mut held, &took);
        give_back(&mut held, &amounts(&[("MEMORY_MB", 512)]));
        assert_eq!(held, amounts(&[("VCPU", 1), ("MEMORY_MB", 512)]));
        let mut sum = amounts(&[("VCPU", 1)]);
        add(&mut sum, amounts(&[("VCPU", 2), ("DISK_GB", 1)]));
        assert_eq!(sum, amounts(&[("VCPU", 3), ("DISK_GB", 1)]));
    }

    #[test]
    fn a_draw_ends_with_its_lease_and_is_never_empty() {
        let end = at("2030-01-02T00:00:00Z");
        let open = Window { start: at("2030-01-01T00:00:00Z"), end: None };
        assert_eq!(ending_with_lease(open, end), Window { start: open.start, end: Some(end) });
        let shorter = Window { start: open.start, end: Some(at("2030-01-01T12:00:00Z")) };
        assert_eq!(ending_with_lease(shorter, end), shorter);
        let after = Window { start: at("2030-01-03T00:00:00Z"), end: None };
        let w = ending_with_lease(after, end);
        assert_eq!(w, Window { start: at("2030-01-01T23:59:59.999999Z"), end: Some(end) });
    }
}
