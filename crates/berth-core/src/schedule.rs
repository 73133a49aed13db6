//! Placing reservations on hosts over a window: which hosts are free, which
//! slots fit, and which choice leaves the future most room.
//!
//! Best fit over time: among the hosts that can take a reservation, prefer
//! those whose free time around the window is tightest (the hold before it
//! ends closest to its start, the hold after it starts closest to its end),
//! so that long free stretches elsewhere stay whole for later leases. Among
//! equally tight hosts, prefer the one the reservation already uses, then the
//! fuller one (packing slots), then by name, so choices are deterministic;
//! or, given a draw ([`place_drawn`]), by the draw mixed with each host's
//! uuid, so that reservations decided at once with different draws spread
//! over hosts that are equally good instead of all taking the first.
//!
//! A series of windows (a recurring lease's occurrences) is ranked once,
//! by the free time around its first window ([`place_ranked`]): each
//! occurrence takes the best-ranked hosts free over it, so a series stays
//! on the same hosts where they are free.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::inventory::Inventory;
use crate::timeline;
use crate::window::Window;

/// Gaps longer than this count as this long: beyond it, "tighter" means nothing.
pub const GAP_HORIZON: Duration = Duration::days(365);

/// A host the scheduler may use, with what others hold on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub provider: Uuid,
    pub name: String,
    pub inventories: BTreeMap<String, Inventory>,
    /// Holds of others (and of slots planned so far) per class, at least
    /// those overlapping the windows being decided.
    pub holds: BTreeMap<String, Vec<(Window, i64)>>,
    /// The latest end of a hold ending at or before the window's start.
    pub previous_end: Option<DateTime<Utc>>,
    /// The earliest start of a hold starting at or after the window's end.
    pub next_start: Option<DateTime<Utc>>,
    /// Held by the reservation being re-placed (an update): kept if it can be.
    pub preferred: bool,
    /// How long the host stays unreservable after a lease on it ends
    /// (`cleaning_time`): every bounded hold, and every window decided,
    /// counts as lasting this much longer ([`Candidate::clean_after`]).
    pub cleaning: Duration,
}

/// What one reservation asks of the hosts.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Hosts { min: u32, max: u32 },
    Slots { amount: u32, resources: BTreeMap<String, i64>, affinity: Option<bool> },
}

/// One slot placed: the provider and what it holds there.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub provider: Uuid,
    pub resources: BTreeMap<String, i64>,
}

/// `window` followed by `cleaning`: its end moved later (an open end stays
/// open; an end past the last date stays where it is).
pub fn with_cleaning(window: &Window, cleaning: Duration) -> Window {
    let end = window.end.map(|e| e.checked_add_signed(cleaning).filter(|t| crate::time::in_range(*t)).unwrap_or(e));
    Window { start: window.start, end }
}

impl Candidate {
    /// Sets the host's cleaning time and lengthens the holds already read
    /// by it. A hold with an end is a lease's (Placement's claims hold from
    /// now on, with no end), so the host is not free again until it has
    /// been cleaned; the windows decided are lengthened alike by
    /// [`fits`](Self::fits) and [`is_free`](Self::is_free), so a lease
    /// also keeps the next one `cleaning` away. The holds must have been
    /// read over the windows at stake widened by `cleaning` before them.
    pub fn clean_after(&mut self, cleaning: Duration) {
        self.cleaning = cleaning.max(Duration::zero());
        for holds in self.holds.values_mut() {
            for (w, _) in holds.iter_mut() {
                *w = with_cleaning(w, self.cleaning);
            }
        }
    }

    /// The whole host: the capacity of every class it has.
    pub fn whole(&self) -> BTreeMap<String, i64> {
        self.inventories.iter().filter(|(_, i)| i.capacity() > 0).map(|(c, i)| (c.clone(), i.capacity())).collect()
    }

    /// Free over the whole window: nothing of anyone else overlaps it.
    pub fn is_free(&self, window: &Window) -> bool {
        let window = with_cleaning(window, self.cleaning);
        !self.whole().is_empty() && self.holds.values().all(|hs| timeline::peak(hs, &window) == 0)
    }

    /// Whether `count` slots of `resources` fit at every instant of `window`.
    pub fn fits(&self, resources: &BTreeMap<String, i64>, count: i64, window: &Window) -> bool {
        let window = &with_cleaning(window, self.cleaning);
        resources.iter().all(|(class, used)| {
            let Some(inv) = self.inventories.get(class) else {
                return false;
            };
            if inv.check_amount("", class, *used).is_err() {
                return false;
            }
            let others = self.holds.get(class).map(|h| timeline::peak(h, window)).unwrap_or(0);
            others + used * count <= inv.capacity()
        })
    }

    /// Free time around `window`, capped at [`GAP_HORIZON`] on each side.
    pub fn gap(&self, window: &Window) -> Duration {
        let before = self.previous_end.map(|e| window.start - e).unwrap_or(GAP_HORIZON).min(GAP_HORIZON);
        let after = match (window.end, self.next_start) {
            (Some(end), Some(s)) => (s - end).min(GAP_HORIZON),
            _ => GAP_HORIZON,
        };
        before.max(Duration::zero()).checked_add(&after.max(Duration::zero())).unwrap_or(Duration::MAX)
    }

    /// Share of capacity left free (per mille, the smallest over `classes`).
    fn room(&self, classes: &BTreeMap<String, i64>, window: &Window) -> i64 {
        classes
            .keys()
            .filter_map(|c| {
                let cap = self.inventories.get(c)?.capacity();
                if cap <= 0 {
                    return None;
                }
                let used = self.holds.get(c).map(|h| timeline::peak(h, window)).unwrap_or(0);
                Some((cap - used).max(0) * 1000 / cap)
            })
            .min()
            .unwrap_or(1000)
    }

    /// Records `resources` held over `window` (and its cleaning after).
    pub fn hold(&mut self, resources: &BTreeMap<String, i64>, window: &Window) {
        let window = with_cleaning(window, self.cleaning);
        for (class, used) in resources {
            self.holds.entry(class.clone()).or_default().push((window, *used));
        }
    }
}

/// Sort key: tightest gap, then kept, then fullest, then the draw's order
/// (all alike without one), then name.
/// The gap is the one around `around` (the series' first window).
fn rank(
    c: &Candidate,
    window: &Window,
    around: &Window,
    classes: &BTreeMap<String, i64>,
    draw: Option<u64>,
) -> (Duration, bool, i64, u64, String) {
    let drawn = draw.map_or(0, |d| mix(d, c.provider));
    (c.gap(around), !c.preferred, c.room(classes, window), drawn, c.name.clone())
}

/// A host's place in the order a draw gives: `draw` and the uuid mixed
/// (SplitMix64's finaliser), so each draw orders the hosts differently.
fn mix(draw: u64, provider: Uuid) -> u64 {
    let (hi, lo) = provider.as_u64_pair();
    let mut z = draw ^ hi.rotate_left(17) ^ lo;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Places one reservation over `window` on the candidates at `eligible`
/// (indexes into `candidates`), recording what it takes in their holds so
/// the next reservation sees it. `Err` says why it does not fit.
pub fn place(
    shape: &Shape,
    eligible: &[usize],
    candidates: &mut [Candidate],
    window: &Window,
) -> Result<Vec<Placed>, String> {
    place_drawn(shape, eligible, candidates, window, None)
}

/// As [`place`], breaking ties between equally good hosts by `draw` (when
/// given) rather than by name. Best fit is unchanged: a tighter gap, a kept
/// host, a fuller host still wins whatever the draw.
pub fn place_drawn(
    shape: &Shape,
    eligible: &[usize],
    candidates: &mut [Candidate],
    window: &Window,
    draw: Option<u64>,
) -> Result<Vec<Placed>, String> {
    place_ranked(shape, eligible, candidates, window, window, draw)
}

/// As [`place_drawn`], ranking hosts by their free time around `around`
/// rather than around `window`: an occurrence of a series, ranked as its
/// first (`around`) ranks them.
pub fn place_ranked(
    shape: &Shape,
    eligible: &[usize],
    candidates: &mut [Candidate],
    window: &Window,
    around: &Window,
    draw: Option<u64>,
) -> Result<Vec<Placed>, String> {
    match shape {
        Shape::Hosts { min, max } => {
            let mut free: Vec<usize> = eligible.iter().copied().filter(|&i| candidates[i].is_free(window)).collect();
            let everything = BTreeMap::new();
            free.sort_by_key(|&i| rank(&candidates[i], window, around, &everything, draw));
            if free.len() < *min as usize {
                return Err(format!(
                    "{} matching host(s) free for the whole window, {} needed ({} match the properties)",
                    free.len(),
                    min,
                    eligible.len()
                ));
            }
            free.truncate(*max as usize);
            let mut out = Vec::new();
            for i in free {
                let whole = candidates[i].whole();
                candidates[i].hold(&whole, window);
                out.push(Placed { provider: candidates[i].provider, resources: whole });
            }
            Ok(out)
        }
        Shape::Slots { amount, resources, affinity } => {
            let n = *amount as i64;
            let best = |candidates: &[Candidate], count: i64, exclude: &[usize]| -> Option<usize> {
                eligible
                    .iter()
                    .copied()
                    .filter(|i| !exclude.contains(i) && candidates[*i].fits(resources, count, window))
                    .min_by_key(|&i| rank(&candidates[i], window, around, resources, draw))
            };
            let mut chosen: Vec<usize> = Vec::new();
            match affinity {
                Some(true) => {
                    let Some(i) = best(candidates, n, &[]) else {
                        return Err(format!("no single matching host has room for {n} slot(s) of {resources:?}"));
                    };
                    chosen.extend(std::iter::repeat_n(i, n as usize));
                    for _ in 0..n {
                        candidates[i].hold(resources, window);
                    }
                }
                Some(false) => {
                    for k in 0..n {
                        let Some(i) = best(candidates, 1, &chosen) else {
                            return Err(format!(
                                "only {k} distinct matching host(s) have room for a slot of {resources:?}, {n} needed"
                            ));
                        };
                        candidates[i].hold(resources, window);
                        chosen.push(i);
                    }
                }
                None => {
                    for k in 0..n {
                        let Some(i) = best(candidates, 1, &[]) else {
                            return Err(format!("room for only {k} of {n} slot(s) of {resources:?}"));
                        };
                        candidates[i].hold(resources, window);
                        chosen.push(i);
                    }
                }
            }
            Ok(chosen
                .into_iter()
                .map(|i| Placed { provider: candidates[i].provider, resources: resources.clone() })
                .collect())
        }
    }
}

/// The earliest instant at or after `from` at which `used` more of a class
/// would exceed `capacity` given `holds`, looking no further than `horizon`:
/// how far a slot holding `used` from `from` on could be extended. `None`:
/// never within the horizon.
pub fn first_conflict(
    holds: &[(Window, i64)],
    used: i64,
    capacity: i64,
    from: DateTime<Utc>,
    horizon: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if horizon <= from {
        return None;
    }
    let span = Window { start: from, end: Some(horizon) };
    let mut points: Vec<(DateTime<Utc>, i64)> = Vec::new();
    for (w, u) in holds {
        if !w.overlaps(&span) {
            continue;
        }
        points.push((w.start.max(from), *u));
        if let Some(e) = w.end {
            if e < horizon {
                points.push((e, -u));
            }
        }
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut level = 0;
    let mut i = 0;
    while i < points.len() {
        let t = points[i].0;
        while i < points.len() && points[i].0 == t {
            level += points[i].1;
            i += 1;
        }
        if level + used > capacity {
            return Some(t);
        }
    }
    None
}

/// Start times worth trying for a window of `duration` within
/// `[from, to]`: `from` itself and every instant a hold ends (capacity only
/// ever frees up when something ends), sorted and distinct.
pub fn start_times(
    holds: impl IntoIterator<Item = Window>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let mut out: Vec<DateTime<Utc>> = vec![from];
    out.extend(holds.into_iter().filter_map(|w| w.end).filter(|e| *e > from && *e <= to));
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::DateMath;
    use chrono::TimeZone;

    fn t(h: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap().plus("t", Duration::hours(h)).unwrap()
    }
    fn w(a: i64, b: i64) -> Window {
        Window::new(t(a), Some(t(b))).unwrap()
    }
    fn host(name: &str, vcpus: i64) -> Candidate {
        Candidate {
            provider: Uuid::new_v4(),
            name: name.into(),
            inventories: BTreeMap::from([("VCPU".into(), Inventory { total: vcpus, ..Default::default() })]),
            holds: BTreeMap::new(),
            previous_end: None,
            next_start: None,
            preferred: false,
            cleaning: Duration::zero(),
        }
    }
    fn vcpus(n: i64) -> BTreeMap<String, i64> {
        BTreeMap::from([("VCPU".to_string(), n)])
    }

    #[test]
    fn a_taken_host_is_not_free_but_back_to_back_is() {
        let mut hs = vec![host("a", 4)];
        let shape = Shape::Hosts { min: 1, max: 1 };
        assert!(place(&shape, &[0], &mut hs, &w(1, 3)).is_ok());
        assert!(place(&shape, &[0], &mut hs, &w(2, 4)).is_err());
        assert!(place(&shape, &[0], &mut hs, &w(3, 5)).is_ok());
        assert!(place(&shape, &[0], &mut hs, &w(0, 1)).is_ok());
    }

    #[test]
    fn min_and_max_take_as_many_free_hosts_as_allowed() {
        let mut hs = vec![host("a", 4), host("b", 4), host("c", 4)];
        hs[2].holds.insert("VCPU".into(), vec![(w(0, 10), 1)]);
        let got = place(&Shape::Hosts { min: 1, max: 5 }, &[0, 1, 2], &mut hs, &w(1, 2)).unwrap();
        assert_eq!(got.len(), 2);
        let err = place(&Shape::Hosts { min: 1, max: 1 }, &[0, 1, 2], &mut hs, &w(1, 2)).unwrap_err();
        assert!(err.contains("0 matching host"), "{err}");
    }

    #[test]
    fn best_fit_prefers_the_tightest_gap() {
        // b has a lease ending right when ours starts; a is empty.
        let mut hs = vec![host("a", 4), host("b", 4)];
        hs[1].previous_end = Some(t(5));
        let got = place(&Shape::Hosts { min: 1, max: 1 }, &[0, 1], &mut hs, &w(5, 6)).unwrap();
        assert_eq!(got[0].provider, hs[1].provider);
        // And a host booked soon after the window beats one booked much later.
        let mut hs = vec![host("a", 4), host("b", 4)];
        hs[0].next_start = Some(t(100));
        hs[1].next_start = Some(t(8));
        let got = place(&Shape::Hosts { min: 1, max: 1 }, &[0, 1], &mut hs, &w(5, 6)).unwrap();
        assert_eq!(got[0].provider, hs[1].provider);
    }

    #[test]
    fn a_draw_spreads_ties_but_never_beats_a_tighter_fit() {
        let hosts: Vec<Candidate> = (0..8).map(|k| host(&format!("h{k}"), 4)).collect();
        let all: Vec<usize> = (0..8).collect();
        let whole = Shape::Hosts { min: 1, max: 1 };
        let first = |draw| place_drawn(&whole, &all, &mut hosts.clone(), &w(1, 2), draw).unwrap()[0].provider;
        // Without a draw, the first by name; with one, each draw its own.
        assert_eq!(first(None), hosts[0].provider);
        assert_eq!(first(None), place(&whole, &all, &mut hosts.clone(), &w(1, 2)).unwrap()[0].provider);
        let picked: std::collections::BTreeSet<Uuid> = (0..64).map(|d| first(Some(d))).collect();
        assert!(picked.len() >= 4, "64 draws over 8 equal hosts picked only {}", picked.len());
        assert_eq!(first(Some(7)), first(Some(7)), "a draw decides the same way twice");
        // A tighter gap wins whatever the draw; so does a fuller host for a slot.
        let mut tight = hosts.clone();
        tight[5].previous_end = Some(t(1));
        for d in 0..32 {
            let got = place_drawn(&whole, &all, &mut tight.clone(), &w(1, 2), Some(d)).unwrap();
            assert_eq!(got[0].provider, tight[5].provider);
        }
        let mut fuller = hosts.clone();
        fuller[3].holds.insert("VCPU".into(), vec![(w(0, 9), 2)]);
        let slot = Shape::Slots { amount: 1, resources: vcpus(1), affinity: None };
        for d in 0..32 {
            let got = place_drawn(&slot, &all, &mut fuller.clone(), &w(1, 2), Some(d)).unwrap();
            assert_eq!(got[0].provider, fuller[3].provider);
        }
    }

    #[test]
    fn slots_follow_affinity() {
        let mut hs = vec![host("a", 4), host("b", 4)];
        let shape = |affinity| Shape::Slots { amount: 2, resources: vcpus(2), affinity };
        let got = place(&shape(Some(true)), &[0, 1], &mut hs.clone(), &w(1, 2)).unwrap();
        assert_eq!(got[0].provider, got[1].provider);
        let got = place(&shape(Some(false)), &[0, 1], &mut hs.clone(), &w(1, 2)).unwrap();
        assert_ne!(got[0].provider, got[1].provider);
        // Any: packs onto one host, leaving the other whole.
        let got = place(&shape(None), &[0, 1], &mut hs, &w(1, 2)).unwrap();
        assert_eq!(got[0].provider, got[1].provider);
        // Now a is full over 1..2: affinity needs another host of room 4.
        let third = Shape::Slots { amount: 3, resources: vcpus(2), affinity: None };
        assert!(place(&third, &[0, 1], &mut hs, &w(1, 2)).is_err());
    }

    #[test]
    fn slots_respect_capacity_over_time() {
        let mut hs = vec![host("a", 4)];
        hs[0].holds.insert("VCPU".into(), vec![(w(2, 4), 3)]);
        let one = Shape::Slots { amount: 1, resources: vcpus(2), affinity: None };
        assert!(place(&one, &[0], &mut hs.clone(), &w(0, 2)).is_ok());
        assert!(place(&one, &[0], &mut hs.clone(), &w(1, 3)).is_err());
        assert!(place(&one, &[0], &mut hs, &w(4, 6)).is_ok());
    }

    #[test]
    fn cleaning_time_keeps_leases_on_a_host_apart() {
        // A lease held a..3; two hours of cleaning: free again from 5.
        let mut hs = vec![host("a", 4)];
        hs[0].holds.insert("VCPU".into(), vec![(w(1, 3), 4)]);
        hs[0].clean_after(Duration::hours(2));
        let whole = Shape::Hosts { min: 1, max: 1 };
        let slot = Shape::Slots { amount: 1, resources: vcpus(1), affinity: None };
        for shape in [&whole, &slot] {
            assert!(place(shape, &[0], &mut hs.clone(), &w(3, 4)).is_err(), "back to back");
            assert!(place(shape, &[0], &mut hs.clone(), &w(4, 6)).is_err(), "within the cleaning");
            assert!(place(shape, &[0], &mut hs.clone(), &w(5, 6)).is_ok(), "after the gap");
            // Before it: our own end needs its cleaning before a's start at 1.
            assert!(place(shape, &[0], &mut hs.clone(), &w(0, 1)).is_err());
        }
        let mut early = vec![host("a", 4)];
        early[0].clean_after(Duration::hours(2));
        assert!(place(&whole, &[0], &mut early, &w(0, 1)).is_ok());
        assert!(place(&whole, &[0], &mut early, &w(2, 3)).is_err(), "what was placed is followed by cleaning too");
        assert!(place(&whole, &[0], &mut early, &w(3, 4)).is_ok());
        // Open-ended holds (Placement's claims) have no end to clean after.
        assert_eq!(with_cleaning(&Window::from(t(1)), Duration::hours(2)), Window::from(t(1)));
    }

    #[test]
    fn extension_stops_at_the_first_conflict() {
        let holds = vec![(w(10, 12), 2), (w(14, 16), 4)];
        assert_eq!(first_conflict(&holds, 2, 4, t(5), t(100)), Some(t(14)));
        assert_eq!(first_conflict(&holds, 3, 4, t(5), t(100)), Some(t(10)));
        assert_eq!(first_conflict(&holds, 3, 4, t(16), t(100)), None);
        assert_eq!(first_conflict(&[(Window::from(t(20)), 1)], 4, 4, t(5), t(100)), Some(t(20)));
    }

    #[test]
    fn start_times_are_when_holds_end() {
        let got = start_times(vec![w(1, 3), w(2, 5), Window::from(t(1)), w(0, 9)], t(2), t(6));
        assert_eq!(got, vec![t(2), t(3), t(5)]);
    }
}
