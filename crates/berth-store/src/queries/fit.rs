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
use chrono::{DateTime, Duration, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

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
    // An unusable host (disabled, or its provider has Nova's
    // COMPUTE_STATUS_DISABLED trait: commands::heal) is placed nowhere.
    let rows = c
        .query(
            "SELECT p.uuid, p.name,
                    CASE WHEN h.provider_uuid IS NOT NULL THEN h.reservable AND NOT h.disabled AND NOT EXISTS (
                        SELECT 1 FROM provider_traits t
                        WHERE t.provider_uuid = p.uuid AND t.trait = 'COMPUTE_STATUS_DISABLED') END,
                    h.capabilities,
                    ARRAY(SELECT t.trait FROM provider_traits t WHERE t.provider_uuid = p.uuid)
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
        let traits: Vec<String> = r.get(4);
        out.insert(
            r.get(0),
            Host { name: r.get(1), enrolment, inventories: BTreeMap::new(), traits: traits.into_iter().collect() },
        );
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
    let hosts = load_hosts(c, Some(ids)).await?;
    let cleanings: HashMap<Uuid, Duration> =
        hosts.iter().map(|(id, h)| (*id, host::cleaning_time(h, cleaning))).collect();
    let longest = cleanings.values().copied().max().unwrap_or(Duration::zero());
    let read = Window {
        start: span.start.checked_sub_signed(longest).unwrap_or(span.start),
        end: span.end.map(|e| e.checked_add_signed(longest).unwrap_or(e)),
    };
    let mut holds = holds_over(c, &hosts, read, own).await?;
    let ids: Vec<Uuid> = hosts.keys().copied().collect();
    let gaps = gaps_around(c, &ids, near, own).await?;
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut index: HashMap<Uuid, usize> = HashMap::new();
    for (id, h) in &hosts {
        let (previous_end, next_start) = gaps.get(id).copied().unwrap_or((None, None));
        index.insert(*id, candidates.len());
        candidates.push(Candidate {
            provider: *id,
            name: h.name.clone(),
            inventories: h.inventories.clone(),
            holds: holds.remove(id).unwrap_or_default(),
            previous_end,
            next_start,
            preferred: false,
            cleaning: Duration::zero(),
        });
        if let Some(c) = candidates.last_mut() {
            c.clean_after(cleanings[id]);
        }
    }
    Ok(Gathered { hosts, candidates, index })
}

/// Per provider, per class: the holds of consumers other than `own` that
/// overlap `span`.
async fn holds_over(
    c: &impl GenericClient,
    hosts: &BTreeMap<Uuid, Host>,
    span: Window,
    own: &[Uuid],
) -> Result<HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>>, StoreError> {
    let mut holds: HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>> = HashMap::new();
    // One probe of the timeline index per provider and class, each bounded
    // by all three of its columns: the cost follows what overlaps the span,
    // not what the provider carries in all.
    let (mut keys_p, mut keys_c): (Vec<Uuid>, Vec<&str>) = (Vec::new(), Vec::new());
    for (id, h) in hosts {
        for class in h.inventories.keys() {
            keys_p.push(*id);
            keys_c.push(class.as_str());
        }
    }
    for r in c
        .query(
            "SELECT q.p, q.rc, lower(a.during), upper(a.during), a.used
             FROM unnest($1::uuid[], $2::text[]) AS q(p, rc)
             CROSS JOIN LATERAL (
                 SELECT during, used FROM allocations
                 WHERE provider_uuid = q.p AND resource_class = q.rc AND during && tstzrange($3, $4, '[)')
                   AND consumer_uuid <> ALL($5)
                 UNION ALL
                 -- A maintenance window holds more than any host has.
                 SELECT during, 1::int8 << 40 FROM maintenance_windows
                 WHERE provider_uuid = q.p AND during && tstzrange($3, $4, '[)')
             ) a",
            &[&keys_p, &keys_c, &span.start, &span.end, &own],
        )
        .await?
    {
        let w = Window { start: r.get(2), end: r.get(3) };
        holds.entry(r.get(0)).or_default().entry(r.get(1)).or_default().push((w, r.get(4)));
    }
    Ok(holds)
}

/// The end of the hold before the window, the start of the one after.
type Gap = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// Per provider: the nearest holds of consumers other than `own` on either
/// side of `near`.
async fn gaps_around(
    c: &impl GenericClient,
    ids: &[Uuid],
    near: Window,
    own: &[Uuid],
) -> Result<HashMap<Uuid, Gap>, StoreError> {
    let mut gaps: HashMap<Uuid, Gap> = HashMap::new();
    for r in c
        .query(
            "SELECT q.p,
                (SELECT max(upper(a.during)) FROM allocations a
                  WHERE a.provider_uuid = q.p AND upper(a.during) <= $2 AND a.consumer_uuid <> ALL($4)),
                (SELECT min(lower(a.during)) FROM allocations a
                  WHERE a.provider_uuid = q.p AND lower(a.during) >= $3 AND a.consumer_uuid <> ALL($4))
             FROM unnest($1::uuid[]) AS q(p)",
            &[&ids, &near.start, &near.end.unwrap_or(near.start), &own],
        )
        .await?
    {
        gaps.insert(r.get(0), (r.get(1), r.get(2)));
    }
    Ok(gaps)
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
        c.hold(&s.resources, window);
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
