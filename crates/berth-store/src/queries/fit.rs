//! Where reservations would fit: the candidate hosts of a set of
//! reservations, what others hold on them, and the decision over one or
//! more windows.
//!
//! Reads only. A command locks the providers it decides on before reading
//! them ([`gather_under`]), so that what it decides on is what the locks
//! protect (`commands::leases`): an update every candidate (found by
//! [`candidate_ids`]), a new lease only those it chose on a read taken
//! without locks ([`gather_candidates`]), checked again ([`still_fits`]).
//! Advice reads the same way without locking (`queries::advice`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use berth_core::host::{self, Host};
use berth_core::lease::{Demand, Slot};
use berth_core::schedule::{self, Candidate, Placed, Shape};
use berth_core::Window;
use chrono::Duration;
use tokio_postgres::Row;
use uuid::Uuid;

use super::timelines::{self, Over, Statement, Timelines};
use crate::client::GenericClient;
use crate::StoreError;

/// Where one reservation's slots may go.
pub(crate) enum Item<'a> {
    /// Keep these slots where they are (re-checked over the window).
    Fixed(&'a [Slot]),
    /// Place anew, preferring the providers listed.
    Place(&'a Demand, Vec<Uuid>),
}

/// Why a reservation did not fit.
pub(crate) struct Unfit {
    pub item: usize,
    pub window: Window,
    pub why: String,
}

/// The candidates of a set of items, with what others hold on them. A
/// decision changes only the candidates (what it holds on them), so a copy
/// to decide on again (`plan::plan_new`) shares the hosts and the index.
#[derive(Clone)]
pub(crate) struct Gathered {
    hosts: Arc<BTreeMap<Uuid, Host>>,
    pub candidates: Vec<Candidate>,
    /// Position in `candidates`, by provider.
    pub index: Arc<HashMap<Uuid, usize>>,
    /// Breaks best fit's ties among equally good hosts by this draw rather
    /// than by name (`schedule::place_drawn`): a new lease's own, so that
    /// creations at once spread over hosts alike instead of queueing on the
    /// first by name. `None`: by name (updates, healing, advice).
    pub draw: Option<u64>,
    /// Placed on by nothing: the hosts another new lease is writing, which
    /// a new lease passes over rather than queue behind (`plan::plan_new`).
    pub passed_over: BTreeSet<Uuid>,
}

/// Per window, per item: the slots placed.
pub(crate) type Plan = Vec<Vec<Vec<Placed>>>;

/// The providers `items` of a lease of `project` may use, sorted: every
/// enrolled host one of them may use, plus the providers they hold or prefer.
pub(crate) async fn candidate_ids(
    c: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
) -> Result<Vec<Uuid>, StoreError> {
    let places = items.iter().any(|i| matches!(i, Item::Place(..)));
    let hosts = if places { timelines::hosts(c, &[], true).await? } else { BTreeMap::new() };
    Ok(candidate_ids_among(&hosts, project, items))
}

/// As [`candidate_ids`], among `hosts`, every enrolled host as
/// `timelines::hosts` reads them: for a command that finds the candidates
/// of many leases on one read.
pub(crate) fn candidate_ids_among(hosts: &BTreeMap<Uuid, Host>, project: &str, items: &[Item<'_>]) -> Vec<Uuid> {
    let demands: Vec<&Demand> = items
        .iter()
        .filter_map(|i| match i {
            Item::Place(d, _) => Some(*d),
            Item::Fixed(_) => None,
        })
        .collect();
    let mut ids: BTreeSet<Uuid> = items
        .iter()
        .flat_map(|i| match i {
            Item::Fixed(slots) => slots.iter().map(|s| s.provider).collect(),
            Item::Place(_, prefer) => prefer.clone(),
        })
        .collect();
    for (id, h) in hosts {
        if demands.iter().any(|d| host::eligible(h, d, project)) {
            ids.insert(*id);
        }
    }
    ids.into_iter().collect()
}

/// Reads the candidates `ids` (those that still exist) and what consumers
/// other than `own` hold on them: the holds overlapping `span`, plus the
/// nearest hold on either side of `near` (for best fit). Each host keeps
/// its cleaning time (`cleaning` unless it names its own) after every
/// lease: the holds are read over `span` widened by it on both sides and
/// lengthened by it (`Candidate::clean_after`).
pub(crate) async fn gather(
    c: &impl GenericClient,
    ids: &[Uuid],
    span: Window,
    near: Window,
    own: &[Uuid],
    cleaning: Duration,
) -> Result<Gathered, StoreError> {
    Ok(gather_under(c, &[], ids, span, near, own, cleaning).await?.1)
}

/// As [`gather`], sent after `lock` (the statements locking `ids`, at most
/// two, from `crate::lock`) in the same round trip, so that what is read is
/// what the lock protects; with the rows of the lock's last statement.
pub(crate) async fn gather_under(
    c: &impl GenericClient,
    lock: &[Statement<'_>],
    ids: &[Uuid],
    span: Window,
    near: Window,
    own: &[Uuid],
    cleaning: Duration,
) -> Result<(Vec<Row>, Gathered), StoreError> {
    let over = Over { ids, every_host: false, span, near, own, cleaning };
    let mut read = timelines::read(c, lock, &over).await?;
    let locked = std::mem::take(&mut read.before);
    let (hosts, candidates, index) = read.into_candidates(|_, _| true);
    Ok((locked, Gathered::new(hosts, candidates, index)))
}

/// The candidates of `items` for a lease of `project` (as [`candidate_ids`]
/// finds them) with what others hold on them, as [`gather`] reads them, in
/// one round trip and without locks: a command locks the providers it
/// chooses afterwards and checks its choice again ([`still_fits`]).
pub(crate) async fn gather_candidates(
    c: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    span: Window,
    near: Window,
    cleaning: Duration,
) -> Result<Gathered, StoreError> {
    let (demands, named) = demands_and_named(items);
    let over = candidates_over(&demands, &named, span, near, cleaning);
    let read = timelines::read(c, &[], &over).await?;
    Ok(candidates_of(read, project, &demands, &named))
}

/// What [`gather_candidates`] reads for `demands` and the providers
/// `named` (as [`demands_and_named`] gives them), for a command to send with
/// statements of its own (`timelines::Reads`); [`candidates_of`] makes the
/// candidates of what it read.
pub(crate) fn candidates_over<'a>(
    demands: &[&Demand],
    named: &'a [Uuid],
    span: Window,
    near: Window,
    cleaning: Duration,
) -> Over<'a> {
    Over { ids: named, every_host: !demands.is_empty(), span, near, own: &[], cleaning }
}

/// The candidates of [`candidates_over`]'s read, for a lease of `project`.
pub(crate) fn candidates_of(read: Timelines, project: &str, demands: &[&Demand], named: &[Uuid]) -> Gathered {
    let (hosts, candidates, index) =
        read.into_candidates(|id, h| named.contains(id) || demands.iter().any(|d| host::eligible(h, d, project)));
    Gathered::new(hosts, candidates, index)
}

impl Gathered {
    fn new(hosts: BTreeMap<Uuid, Host>, candidates: Vec<Candidate>, index: HashMap<Uuid, usize>) -> Gathered {
        let (hosts, index) = (Arc::new(hosts), Arc::new(index));
        Gathered { hosts, candidates, index, draw: None, passed_over: BTreeSet::new() }
    }
}

/// The demands of the items to place, and the providers they name (held
/// or preferred).
pub(crate) fn demands_and_named<'a>(items: &[Item<'a>]) -> (Vec<&'a Demand>, Vec<Uuid>) {
    let demands = items
        .iter()
        .filter_map(|i| match i {
            Item::Place(d, _) => Some(*d),
            Item::Fixed(_) => None,
        })
        .collect();
    let named: BTreeSet<Uuid> = items
        .iter()
        .flat_map(|i| match i {
            Item::Fixed(slots) => slots.iter().map(|s| s.provider).collect(),
            Item::Place(_, prefer) => prefer.clone(),
        })
        .collect();
    (demands, named.into_iter().collect())
}

/// The providers a plan places slots on, sorted.
pub(crate) fn chosen(plan: &Plan) -> Vec<Uuid> {
    let ids: BTreeSet<Uuid> = plan.iter().flatten().flatten().map(|p| p.provider).collect();
    ids.into_iter().collect()
}

/// Whether `plan`, decided on a read taken without locks, still holds on
/// `fresh`, read under the locks of the providers it chose: each slot's
/// host still one its item may use (and, for a whole host, still free and
/// still the same whole), every slot fitting at every instant of its window
/// beside what others hold and the plan's other slots. `Err`: the providers
/// where it no longer does.
pub(crate) fn still_fits(
    fresh: &mut Gathered,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    plan: &Plan,
) -> Result<(), BTreeSet<Uuid>> {
    let mut lost = BTreeSet::new();
    for (window, per_item) in windows.iter().zip(plan) {
        for (item, placed) in items.iter().zip(per_item) {
            for p in placed {
                let Some(&i) = fresh.index.get(&p.provider) else {
                    lost.insert(p.provider);
                    continue;
                };
                let fits = match item {
                    Item::Place(d @ Demand::Hosts { .. }, _) => {
                        let c = &fresh.candidates[i];
                        host::eligible(&fresh.hosts[&p.provider], d, project)
                            && c.is_free(window)
                            && c.whole() == p.resources
                    }
                    Item::Place(d, _) => {
                        host::eligible(&fresh.hosts[&p.provider], d, project)
                            && fresh.candidates[i].fits(&p.resources, 1, window)
                    }
                    Item::Fixed(_) => fresh.candidates[i].fits(&p.resources, 1, window),
                };
                if !fits {
                    lost.insert(p.provider);
                }
                fresh.candidates[i].hold(&p.resources, window);
            }
        }
    }
    if lost.is_empty() {
        Ok(())
    } else {
        Err(lost)
    }
}

/// Decides every item of a lease of `project` over every window, in order;
/// the holds each placement takes are seen by the next. Hosts are ranked
/// by their free time around the first window, for every window (a
/// series stays on the same hosts where they are free;
/// `schedule::place_ranked`): the candidates' nearest holds are read
/// around it. Returns, per window, per item, the slots.
pub(crate) fn decide(g: &mut Gathered, project: &str, items: &[Item<'_>], windows: &[Window]) -> Result<Plan, Unfit> {
    let mut out = Vec::new();
    let Some(first) = windows.first() else {
        return Ok(out);
    };
    for window in windows {
        let mut per_item = Vec::new();
        for (n, item) in items.iter().enumerate() {
            let placed = match item {
                Item::Fixed(slots) => keep(g, slots, window),
                Item::Place(demand, prefer) => place(g, project, demand, prefer, window, first),
            };
            per_item.push(placed.map_err(|why| Unfit { item: n, window: *window, why })?);
        }
        out.push(per_item);
    }
    Ok(out)
}

/// Keeps `slots` where they are over `window`, if they still fit there.
fn keep(g: &mut Gathered, slots: &[Slot], window: &Window) -> Result<Vec<Placed>, String> {
    let mut placed = Vec::new();
    for s in slots {
        let Some(&i) = g.index.get(&s.provider) else {
            return Err(format!("provider {} is gone", s.provider));
        };
        let c = &mut g.candidates[i];
        if !c.fits(&s.resources, 1, window) {
            return Err(format!("its slot on {} has no room over the new window", c.name));
        }
        c.hold(&s.resources, window);
        placed.push(Placed { provider: s.provider, resources: s.resources.clone() });
    }
    Ok(placed)
}

/// Places `demand` of a lease of `project` over `window` on the hosts it
/// may use, preferring those in `prefer`, ranked around `around`.
fn place(
    g: &mut Gathered,
    project: &str,
    demand: &Demand,
    prefer: &[Uuid],
    window: &Window,
    around: &Window,
) -> Result<Vec<Placed>, String> {
    let shape = match demand {
        Demand::Hosts { min, max, .. } => Shape::Hosts { min: *min, max: *max },
        Demand::Slots { amount, resources, affinity, .. } => {
            Shape::Slots { amount: *amount, resources: resources.clone(), affinity: *affinity }
        }
        Demand::Nothing => return Ok(Vec::new()),
    };
    let eligible: Vec<usize> = g
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| !g.passed_over.contains(&c.provider) && host::eligible(&g.hosts[&c.provider], demand, project))
        .map(|(i, _)| i)
        .collect();
    for c in g.candidates.iter_mut() {
        c.preferred = prefer.contains(&c.provider);
    }
    schedule::place_ranked(&shape, &eligible, &mut g.candidates, window, around, g.draw)
}
