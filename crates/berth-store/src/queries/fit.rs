//! Where reservations would fit: the candidate hosts of a set of
//! reservations, what others hold on them, and the decision over one or
//! more windows.
//!
//! Reads only. A command locks the candidates' provider rows between
//! finding them ([`candidate_ids`]) and reading them ([`gather`]), so that
//! what it decides on is what the locks protect (`commands::leases`); advice
//! reads the same way without locking (`queries::advice`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::host::{self, Enrolment, Host};
use berth_core::lease::{Demand, Slot};
use berth_core::schedule::{self, Candidate, Placed, Shape};
use berth_core::Window;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::{sql, StoreError};

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

/// The candidates of a set of items, with what others hold on them.
#[derive(Clone)]
pub(crate) struct Gathered {
    hosts: BTreeMap<Uuid, Host>,
    pub candidates: Vec<Candidate>,
    /// Position in `candidates`, by provider.
    pub index: HashMap<Uuid, usize>,
}

/// Per window, per item: the slots placed.
pub(crate) type Plan = Vec<Vec<Vec<Placed>>>;

/// Providers (named, with inventories), and host data where enrolled:
/// `only` these, or every enrolled host.
async fn load_hosts(c: &impl GenericClient, only: Option<&[Uuid]>) -> Result<BTreeMap<Uuid, Host>, StoreError> {
    let rows = c
        .query(
            "SELECT p.uuid, p.name, h.reservable, h.capabilities
             FROM providers p LEFT JOIN hosts h ON h.provider_uuid = p.uuid
             WHERE CASE WHEN $1::uuid[] IS NULL THEN h.provider_uuid IS NOT NULL ELSE p.uuid = ANY($1) END",
            &[&only],
        )
        .await?;
    let mut out: BTreeMap<Uuid, Host> = BTreeMap::new();
    for r in rows {
        let reservable: Option<bool> = r.get(2);
        let caps: Option<Value> = r.get(3);
        let enrolment = reservable.map(|reservable| Enrolment {
            reservable,
            capabilities: caps.and_then(|c| serde_json::from_value(c).ok()).unwrap_or_default(),
        });
        out.insert(r.get(0), Host { name: r.get(1), enrolment, inventories: BTreeMap::new() });
    }
    let ids: Vec<Uuid> = out.keys().copied().collect();
    for r in c
        .query(
            "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
             FROM inventories WHERE provider_uuid = ANY($1)",
            &[&ids],
        )
        .await?
    {
        if let Some(h) = out.get_mut(&r.get::<_, Uuid>(0)) {
            h.inventories.insert(r.get(1), super::inventory_at(&r, 2));
        }
    }
    Ok(out)
}

/// The providers `items` of a lease of `project` may use, sorted: every
/// enrolled host one of them may use, plus the providers they hold or prefer.
pub(crate) async fn candidate_ids(
    c: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
) -> Result<Vec<Uuid>, StoreError> {
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
    if !demands.is_empty() {
        for (id, h) in load_hosts(c, None).await? {
            if demands.iter().any(|d| host::eligible(&h, d, project)) {
                ids.insert(id);
            }
        }
    }
    Ok(ids.into_iter().collect())
}

/// Reads the candidates `ids` (those that still exist) and what consumers
/// other than `own` hold on them: the holds overlapping `span`, plus the
/// nearest hold on either side of `near` (for best fit).
pub(crate) async fn gather(
    c: &impl GenericClient,
    ids: &[Uuid],
    span: Window,
    near: Window,
    own: &[Uuid],
) -> Result<Gathered, StoreError> {
    let read = read_timelines(c, ids, false, span, near, own).await?;
    Ok(read.into_gathered(|_| true))
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
    own: &[Uuid],
) -> Result<Gathered, StoreError> {
    let (demands, named) = demands_and_named(items);
    let read = read_timelines(c, &named, !demands.is_empty(), span, near, own).await?;
    Ok(read.into_gathered(|(id, h)| named.contains(id) || demands.iter().any(|d| host::eligible(h, d, project))))
}

/// The demands of the items to place, and the providers they name (held
/// or preferred).
fn demands_and_named<'a>(items: &[Item<'a>]) -> (Vec<&'a Demand>, Vec<Uuid>) {
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

/// A statement over `ids`, the providers read: those of `$1`, and every
/// enrolled host when `$2`.
macro_rules! over_ids {
    ($select:literal) => {
        concat!(
            "WITH ids AS (SELECT uuid FROM providers WHERE uuid = ANY($1) UNION SELECT provider_uuid FROM hosts WHERE $2)",
            $select
        )
    };
}

/// The providers read, named, with their host data where enrolled.
const TIMELINE_HOSTS: &str = over_ids!(
    " SELECT p.uuid, p.name, h.reservable, h.capabilities
     FROM ids JOIN providers p ON p.uuid = ids.uuid LEFT JOIN hosts h ON h.provider_uuid = p.uuid"
);

const TIMELINE_INVENTORIES: &str = over_ids!(
    " SELECT i.provider_uuid, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
            i.allocation_ratio
     FROM ids JOIN inventories i ON i.provider_uuid = ids.uuid"
);

/// One probe of the timeline index per provider and class, each bounded by
/// all three of its columns: the cost follows what overlaps the span, not
/// what the provider carries in all.
const TIMELINE_HOLDS: &str = over_ids!(
    " SELECT i.provider_uuid, i.resource_class, lower(a.during), upper(a.during), a.used
     FROM ids JOIN inventories i ON i.provider_uuid = ids.uuid
     CROSS JOIN LATERAL (
         SELECT during, used FROM allocations
         WHERE provider_uuid = i.provider_uuid AND resource_class = i.resource_class
           AND during && tstzrange($3, $4, '[)') AND consumer_uuid <> ALL($5)
     ) a"
);

/// Per provider: the nearest holds of others on either side of the window
/// `[$3, $4)`.
const TIMELINE_GAPS: &str = over_ids!(
    " SELECT ids.uuid,
        (SELECT max(upper(a.during)) FROM allocations a
          WHERE a.provider_uuid = ids.uuid AND upper(a.during) <= $3 AND a.consumer_uuid <> ALL($5)),
        (SELECT min(lower(a.during)) FROM allocations a
          WHERE a.provider_uuid = ids.uuid AND lower(a.during) >= $4 AND a.consumer_uuid <> ALL($5))
     FROM ids"
);

/// What [`read_timelines`] read, before the candidates are picked.
struct Timelines {
    hosts: BTreeMap<Uuid, Host>,
    holds: HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>>,
    gaps: HashMap<Uuid, Gap>,
}

/// Providers `ids` (and every enrolled host when `every_host`), with their
/// inventories, the holds of consumers other than `own` overlapping `span`
/// and the nearest on either side of `near`: four prepared statements sent
/// together.
async fn read_timelines(
    c: &impl GenericClient,
    ids: &[Uuid],
    every_host: bool,
    span: Window,
    near: Window,
    own: &[Uuid],
) -> Result<Timelines, StoreError> {
    read_after(c, &[], ids, every_host, span, near, own).await
}

/// A statement with its parameters, to send in a pipeline.
type Statement<'a> = (&'a str, &'a [&'a (dyn ToSql + Sync)]);

/// As [`read_timelines`], sent after the statements `before` (at most two).
async fn read_after(
    c: &impl GenericClient,
    before: &[Statement<'_>],
    ids: &[Uuid],
    every_host: bool,
    span: Window,
    near: Window,
    own: &[Uuid],
) -> Result<Timelines, StoreError> {
    let near_end = near.end.unwrap_or(near.start);
    let over = [&ids as &(dyn ToSql + Sync), &every_host, &span.start, &span.end, &own];
    let around = [&ids as &(dyn ToSql + Sync), &every_host, &near.start, &near_end, &own];
    let reads = [
        (TIMELINE_HOSTS, &over[..2]),
        (TIMELINE_INVENTORIES, &over[..2]),
        (TIMELINE_HOLDS, &over[..]),
        (TIMELINE_GAPS, &around[..]),
    ];
    let [host_rows, inventory_rows, hold_rows, gap_rows] = match before {
        [] => sql::pipeline(c, reads).await?,
        [one] => {
            let [_, a, b, c, d] = sql::pipeline(c, [*one, reads[0], reads[1], reads[2], reads[3]]).await?;
            [a, b, c, d]
        }
        [one, two] => {
            let [_, _, a, b, c, d] = sql::pipeline(c, [*one, *two, reads[0], reads[1], reads[2], reads[3]]).await?;
            [a, b, c, d]
        }
        _ => unreachable!("at most two statements before the reads"),
    };
    let mut hosts: BTreeMap<Uuid, Host> = BTreeMap::new();
    for r in host_rows {
        let reservable: Option<bool> = r.get(2);
        let caps: Option<Value> = r.get(3);
        let enrolment = reservable.map(|reservable| Enrolment {
            reservable,
            capabilities: caps.and_then(|c| serde_json::from_value(c).ok()).unwrap_or_default(),
        });
        hosts.insert(r.get(0), Host { name: r.get(1), enrolment, inventories: BTreeMap::new() });
    }
    for r in inventory_rows {
        if let Some(h) = hosts.get_mut(&r.get::<_, Uuid>(0)) {
            h.inventories.insert(r.get(1), super::inventory_at(&r, 2));
        }
    }
    let mut holds: HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>> = HashMap::new();
    for r in hold_rows {
        let w = Window { start: r.get(2), end: r.get(3) };
        holds.entry(r.get(0)).or_default().entry(r.get(1)).or_default().push((w, r.get(4)));
    }
    let gaps = gap_rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect();
    Ok(Timelines { hosts, holds, gaps })
}

impl Timelines {
    /// The candidates: the providers read that `keep` keeps.
    fn into_gathered(mut self, keep: impl Fn((&Uuid, &Host)) -> bool) -> Gathered {
        self.hosts.retain(|id, h| keep((id, h)));
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut index: HashMap<Uuid, usize> = HashMap::new();
        for (id, h) in &self.hosts {
            let (previous_end, next_start) = self.gaps.get(id).copied().unwrap_or((None, None));
            index.insert(*id, candidates.len());
            candidates.push(Candidate {
                provider: *id,
                name: h.name.clone(),
                inventories: h.inventories.clone(),
                holds: self.holds.remove(id).unwrap_or_default(),
                previous_end,
                next_start,
                preferred: false,
            });
        }
        Gathered { hosts: self.hosts, candidates, index }
    }
}

/// The end of the hold before the window, the start of the one after.
type Gap = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// As [`gather`], sent after `lock` (the statements locking `ids`, at most
/// two, from `crate::lock`) in the same round trip, so that what is read is
/// what the lock protects.
pub(crate) async fn gather_under(
    c: &impl GenericClient,
    lock: &[Statement<'_>],
    ids: &[Uuid],
    span: Window,
    near: Window,
    own: &[Uuid],
) -> Result<Gathered, StoreError> {
    let read = read_after(c, lock, ids, false, span, near, own).await?;
    Ok(read.into_gathered(|_| true))
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
                let c = &mut fresh.candidates[i];
                for (class, used) in &p.resources {
                    c.holds.entry(class.clone()).or_default().push((*window, *used));
                }
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
/// the holds each placement takes are seen by the next. Returns, per
/// window, per item, the slots.
pub(crate) fn decide(g: &mut Gathered, project: &str, items: &[Item<'_>], windows: &[Window]) -> Result<Plan, Unfit> {
    let mut out = Vec::new();
    for window in windows {
        let mut per_item = Vec::new();
        for (n, item) in items.iter().enumerate() {
            let placed = match item {
                Item::Fixed(slots) => keep(g, slots, window),
                Item::Place(demand, prefer) => place(g, project, demand, prefer, window),
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
        for (class, used) in &s.resources {
            c.holds.entry(class.clone()).or_default().push((*window, *used));
        }
        placed.push(Placed { provider: s.provider, resources: s.resources.clone() });
    }
    Ok(placed)
}

/// Places `demand` of a lease of `project` over `window` on the hosts it
/// may use, preferring those in `prefer`.
fn place(
    g: &mut Gathered,
    project: &str,
    demand: &Demand,
    prefer: &[Uuid],
    window: &Window,
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
        .filter(|(_, c)| host::eligible(&g.hosts[&c.provider], demand, project))
        .map(|(i, _)| i)
        .collect();
    for c in g.candidates.iter_mut() {
        c.preferred = prefer.contains(&c.provider);
    }
    schedule::place(&shape, &eligible, &mut g.candidates, window)
}
