//! Leases: create, update and delete, each one transaction that places every
//! reservation over the lease's window or changes nothing.
//!
//! Placing: the enrolled hosts that match a reservation are its candidates.
//! Their provider rows are locked in uuid order, then only the allocations
//! overlapping the window are read (the `allocations_timeline` GiST index),
//! plus the nearest hold before and after it for best fit. berth-core's
//! scheduler chooses; each slot (a whole host, or one instance slot) becomes
//! a consumer whose allocations hold over the window, written with
//! `AllocationsReplaced` beside the lease's own event.

use berth_core::time::DateMath;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::dates::{format_date, DateSpec};
use berth_core::event::Allocation;
use berth_core::lease::{
    self, codes, Demand, LeaseChange, LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus, ReservationRecord,
    ReservationStatus, Slot, MAX_RESERVATIONS,
};
use berth_core::query::Query;
use berth_core::schedule::{self, Candidate, Placed, Shape};
use berth_core::{Error, Event, EventMeta, Inventory, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde_json::Value;
use uuid::Uuid;

use super::{now, record};
use crate::queries::leases::{load_leases, visible};
use crate::{Store, StoreError};

/// The consumer type of a reservation's slots.
pub const SLOT_CONSUMER_TYPE: &str = "RESERVATION";

/// A reservation as the plugin resolved it.
#[derive(Debug, Clone)]
pub struct NewReservation {
    pub resource_type: String,
    /// The parameters as the client gave them (shown back as they are).
    pub params: Value,
    pub demand: Demand,
}

#[derive(Debug, Clone)]
pub enum LeaseDates {
    One {
        start: DateSpec,
        end: DateSpec,
        before_end: Option<DateTime<Utc>>,
    },
    /// A recurring lease: one lease per occurrence, booked all or nothing.
    Recurring(Vec<(DateTime<Utc>, DateTime<Utc>)>),
}

#[derive(Debug, Clone)]
pub struct NewLease {
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    pub dates: LeaseDates,
    pub reservations: Vec<NewReservation>,
}

/// A reservation's new parameters in an update.
#[derive(Debug, Clone)]
pub struct ReservationUpdate {
    pub id: Uuid,
    pub params: Value,
    pub demand: Demand,
}

#[derive(Debug, Clone, Default)]
pub struct LeaseUpdate {
    pub name: Option<String>,
    pub start: Option<DateSpec>,
    pub end: Option<DateSpec>,
    pub before_end: Option<DateTime<Utc>>,
    pub reservations: Vec<ReservationUpdate>,
}

/// Where one reservation's slots may go.
enum Item<'a> {
    /// Keep these slots where they are (re-checked over the window).
    Fixed(&'a [Slot]),
    /// Place anew, preferring the providers listed.
    Place(&'a Demand, Vec<Uuid>),
}

#[derive(Clone)]
struct HostRow {
    name: String,
    host: Option<(bool, BTreeMap<String, Value>)>,
    inventories: BTreeMap<String, Inventory>,
}

impl HostRow {
    fn hypervisor(&self, key: &str) -> Option<Value> {
        let total = |c: &str| self.inventories.get(c).map(|i| Value::from(i.total));
        match key {
            "vcpus" => total("VCPU"),
            "memory_mb" => total("MEMORY_MB"),
            "local_gb" => total("DISK_GB"),
            "hypervisor_hostname" | "name" | "service_name" => Some(Value::from(self.name.clone())),
            _ => None,
        }
    }

    fn eligible(&self, demand: &Demand) -> bool {
        let Some((reservable, caps)) = &self.host else {
            return false;
        };
        let caps_match = |q: &Option<Query>| q.as_ref().is_none_or(|q| q.matches(&|k| caps.get(k).cloned()));
        *reservable
            && match demand {
                Demand::Hosts { hypervisor_properties, resource_properties, .. } => {
                    hypervisor_properties.as_ref().is_none_or(|q| q.matches(&|k| self.hypervisor(k)))
                        && caps_match(resource_properties)
                }
                Demand::Slots { resource_properties, .. } => caps_match(resource_properties),
                Demand::Nothing => false,
            }
    }
}

/// Providers (named, with inventories), and host data where enrolled.
async fn load_hosts(tx: &Transaction<'_>, only: Option<&[Uuid]>) -> Result<BTreeMap<Uuid, HostRow>, StoreError> {
    let rows = tx
        .query(
            "SELECT p.uuid, p.name, h.reservable, h.capabilities
             FROM providers p LEFT JOIN hosts h ON h.provider_uuid = p.uuid
             WHERE CASE WHEN $1::uuid[] IS NULL THEN h.provider_uuid IS NOT NULL ELSE p.uuid = ANY($1) END",
            &[&only],
        )
        .await?;
    let mut out: BTreeMap<Uuid, HostRow> = BTreeMap::new();
    for r in rows {
        let reservable: Option<bool> = r.get(2);
        let caps: Option<Value> = r.get(3);
        let host = reservable.map(|res| (res, caps.and_then(|c| serde_json::from_value(c).ok()).unwrap_or_default()));
        out.insert(r.get(0), HostRow { name: r.get(1), host, inventories: BTreeMap::new() });
    }
    let ids: Vec<Uuid> = out.keys().copied().collect();
    for r in tx
        .query(
            "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
             FROM inventories WHERE provider_uuid = ANY($1)",
            &[&ids],
        )
        .await?
    {
        let inv = Inventory {
            total: r.get(2),
            reserved: r.get(3),
            min_unit: r.get(4),
            max_unit: r.get(5),
            step_size: r.get(6),
            allocation_ratio: r.get(7),
        };
        if let Some(h) = out.get_mut(&r.get::<_, Uuid>(0)) {
            h.inventories.insert(r.get(1), inv);
        }
    }
    Ok(out)
}

/// Why a reservation did not fit.
struct Unfit {
    item: usize,
    window: Window,
    why: String,
}

/// The candidates of a set of items, with what others hold on them.
#[derive(Clone)]
struct Gathered {
    hosts: BTreeMap<Uuid, HostRow>,
    candidates: Vec<Candidate>,
    index: HashMap<Uuid, usize>,
}

/// Reads the candidates of `items`: every enrolled host one of them may
/// use, plus the providers they hold or prefer. With `lock`, their provider
/// rows are locked in uuid order first and read again after, so what is
/// decided on is what the locks protect. Only holds overlapping `span` are
/// read, plus the nearest hold on either side of `near` (for best fit).
async fn gather(
    tx: &Transaction<'_>,
    items: &[Item<'_>],
    span: Window,
    near: Window,
    own: &[Uuid],
    lock: bool,
) -> Result<Gathered, StoreError> {
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
        for (id, h) in load_hosts(tx, None).await? {
            if demands.iter().any(|d| h.eligible(d)) {
                ids.insert(id);
            }
        }
    }
    let ids: Vec<Uuid> = ids.into_iter().collect();
    if lock {
        tx.query("SELECT 1 FROM providers WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE", &[&ids]).await?;
    }
    let hosts = load_hosts(tx, Some(&ids)).await?;
    let ids: Vec<Uuid> = hosts.keys().copied().collect();
    let mut holds: HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>> = HashMap::new();
    // One probe of the timeline index per provider and class, each bounded
    // by all three of its columns: the cost follows what overlaps the span,
    // not what the provider carries in all.
    let (mut keys_p, mut keys_c): (Vec<Uuid>, Vec<&str>) = (Vec::new(), Vec::new());
    for (id, h) in &hosts {
        for class in h.inventories.keys() {
            keys_p.push(*id);
            keys_c.push(class.as_str());
        }
    }
    for r in tx
        .query(
            "SELECT q.p, q.rc, lower(a.during), upper(a.during), a.used
             FROM unnest($1::uuid[], $2::text[]) AS q(p, rc)
             CROSS JOIN LATERAL (
                 SELECT during, used FROM allocations
                 WHERE provider_uuid = q.p AND resource_class = q.rc AND during && tstzrange($3, $4, '[)')
                   AND consumer_uuid <> ALL($5)
             ) a",
            &[&keys_p, &keys_c, &span.start, &span.end, &own],
        )
        .await?
    {
        let w = Window { start: r.get(2), end: r.get(3) };
        holds.entry(r.get(0)).or_default().entry(r.get(1)).or_default().push((w, r.get(4)));
    }
    // Per provider: the end of the hold before the window, the start of the one after.
    type Gap = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);
    let mut gaps: HashMap<Uuid, Gap> = HashMap::new();
    for r in tx
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
        });
    }
    Ok(Gathered { hosts, candidates, index })
}

/// Decides every item over every window, in order; the holds each placement
/// takes are seen by the next. Returns, per window, per item, the slots.
fn decide(g: &mut Gathered, items: &[Item<'_>], windows: &[Window]) -> Result<Vec<Vec<Vec<Placed>>>, Unfit> {
    let mut out = Vec::new();
    for window in windows {
        let mut per_item = Vec::new();
        for (n, item) in items.iter().enumerate() {
            let unfit = |why: String| Unfit { item: n, window: *window, why };
            match item {
                Item::Fixed(slots) => {
                    let mut placed = Vec::new();
                    for s in *slots {
                        let Some(&i) = g.index.get(&s.provider) else {
                            return Err(unfit(format!("provider {} is gone", s.provider)));
                        };
                        let c = &mut g.candidates[i];
                        if !c.fits(&s.resources, 1, window) {
                            return Err(unfit(format!("its slot on {} has no room over the new window", c.name)));
                        }
                        for (class, used) in &s.resources {
                            c.holds.entry(class.clone()).or_default().push((*window, *used));
                        }
                        placed.push(Placed { provider: s.provider, resources: s.resources.clone() });
                    }
                    per_item.push(placed);
                }
                Item::Place(demand, prefer) => {
                    let shape = match demand {
                        Demand::Hosts { min, max, .. } => Shape::Hosts { min: *min, max: *max },
                        Demand::Slots { amount, resources, affinity, .. } => {
                            Shape::Slots { amount: *amount, resources: resources.clone(), affinity: *affinity }
                        }
                        Demand::Nothing => {
                            per_item.push(Vec::new());
                            continue;
                        }
                    };
                    let eligible: Vec<usize> = g
                        .candidates
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| g.hosts[&c.provider].eligible(demand))
                        .map(|(i, _)| i)
                        .collect();
                    for c in g.candidates.iter_mut() {
                        c.preferred = prefer.contains(&c.provider);
                    }
                    match schedule::place(&shape, &eligible, &mut g.candidates, window) {
                        Ok(p) => per_item.push(p),
                        Err(why) => return Err(unfit(why)),
                    }
                }
            }
        }
        out.push(per_item);
    }
    Ok(out)
}

/// Places every item over every window, in one consistent read under the
/// provider locks.
async fn plan(
    tx: &Transaction<'_>,
    items: &[Item<'_>],
    windows: &[Window],
    own: &[Uuid],
) -> Result<Result<Vec<Vec<Vec<Placed>>>, Unfit>, StoreError> {
    let span = Window {
        start: windows.iter().map(|w| w.start).min().expect("a window"),
        end: windows.iter().filter_map(|w| w.end).max(),
    };
    // Nothing to place (reservations that hold no inventory): no reads, no locks.
    let idle = items.iter().all(|i| match i {
        Item::Place(d, _) => matches!(d, Demand::Nothing),
        Item::Fixed(slots) => slots.is_empty(),
    });
    if idle {
        return Ok(Ok(windows.iter().map(|_| items.iter().map(|_| Vec::new()).collect()).collect()));
    }
    let mut g = gather(tx, items, span, windows[0], own, true).await?;
    Ok(decide(&mut g, items, windows))
}

fn unfit_error(u: Unfit, types: &[&str], recurring: bool) -> Error {
    let when =
        if recurring { format!(" in the occurrence starting {}", format_date(u.window.start)) } else { String::new() };
    lease::no_capacity(
        u.item,
        format!("not enough capacity for reservation {} ({}){when}: {}", u.item, types[u.item], u.why),
    )
}

/// Each slot's allocations over the lease's window: its resources less what
/// consumers draw from it (`drawn`, by slot consumer).
fn slot_events(lease: &LeaseRecord, drawn: &HashMap<Uuid, BTreeMap<String, i64>>, at: DateTime<Utc>) -> Vec<Event> {
    let window = Window { start: lease.start, end: Some(lease.end) };
    let none = BTreeMap::new();
    lease
        .reservations
        .iter()
        .flat_map(|r| r.slots.iter())
        .map(|s| Event::AllocationsReplaced {
            consumer: s.consumer,
            project_id: lease.project_id.clone(),
            user_id: lease.user_id.clone(),
            consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
            allocations: s
                .resources
                .iter()
                .map(|(class, used)| (class, used - drawn.get(&s.consumer).unwrap_or(&none).get(class).unwrap_or(&0)))
                .filter(|(_, used)| *used > 0)
                .map(|(class, used)| Allocation { provider: s.provider, resource_class: class.clone(), used, window })
                .collect(),
            providers_bumped: None,
            at,
        })
        .collect()
}

/// What consumers draw from these slots: (slot, consumer, resources).
async fn draws_of(
    tx: &Transaction<'_>,
    slots: &[Uuid],
) -> Result<Vec<(Uuid, Uuid, BTreeMap<String, i64>)>, StoreError> {
    Ok(tx
        .query(
            "SELECT slot_consumer, consumer_uuid, resources FROM reservation_draws WHERE slot_consumer = ANY($1)",
            &[&slots],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1), serde_json::from_value(r.get(2)).unwrap_or_default()))
        .collect())
}

/// A consumer drawing from a slot keeps its allocations on the slot's
/// provider until the lease ends: when the end moves, they move with it.
async fn follow_end(
    tx: &Transaction<'_>,
    consumer: Uuid,
    providers: &[Uuid],
    old_end: DateTime<Utc>,
    new_end: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<Option<Event>, StoreError> {
    let Some(who) =
        tx.query_opt("SELECT project_id, user_id, consumer_type FROM consumers WHERE uuid = $1", &[&consumer]).await?
    else {
        return Ok(None);
    };
    let rows = tx
        .query(
            "SELECT provider_uuid, resource_class, used, lower(during), upper(during) FROM allocations
             WHERE consumer_uuid = $1 ORDER BY provider_uuid, resource_class, lower(during)",
            &[&consumer],
        )
        .await?;
    let allocations: Vec<Allocation> = rows
        .iter()
        .filter_map(|r| {
            let provider: Uuid = r.get(0);
            let start: DateTime<Utc> = r.get(3);
            let mut end: Option<DateTime<Utc>> = r.get(4);
            if providers.contains(&provider) && end == Some(old_end) {
                end = Some(new_end);
            }
            if end.is_some_and(|e| e <= start) {
                return None;
            }
            Some(Allocation { provider, resource_class: r.get(1), used: r.get(2), window: Window { start, end } })
        })
        .collect();
    Ok(Some(Event::AllocationsReplaced {
        consumer,
        project_id: who.get(0),
        user_id: who.get(1),
        consumer_type: who.get(2),
        allocations,
        providers_bumped: None,
        at,
    }))
}

fn released(consumer: Uuid, lease: &LeaseRecord, at: DateTime<Utc>) -> Event {
    Event::AllocationsReplaced {
        consumer,
        project_id: lease.project_id.clone(),
        user_id: lease.user_id.clone(),
        consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
        allocations: Vec::new(),
        providers_bumped: None,
        at,
    }
}

async fn check_name_free(
    tx: &Transaction<'_>,
    project: &str,
    names: &[String],
    except: Option<Uuid>,
) -> Result<(), StoreError> {
    let taken = tx
        .query_opt(
            "SELECT name FROM leases WHERE project_id = $1 AND name = ANY($2) AND ($3::uuid IS NULL OR id <> $3) LIMIT 1",
            &[&project, &names, &except],
        )
        .await?;
    if let Some(r) = taken {
        let name: String = r.get(0);
        return Err(
            Error::conflict(codes::DUPLICATE_LEASE_NAME, format!("a lease named {name:?} already exists")).into()
        );
    }
    Ok(())
}

async fn lock_slot_consumers(tx: &Transaction<'_>, lease: &LeaseRecord) -> Result<(), StoreError> {
    let mut consumers: Vec<Uuid> = lease.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
    consumers.sort();
    tx.query("SELECT 1 FROM consumers WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE", &[&consumers]).await?;
    Ok(())
}

async fn lock_lease(
    tx: &Transaction<'_>,
    id: Uuid,
    project: Option<&str>,
) -> Result<crate::queries::leases::Lease, StoreError> {
    tx.query_opt("SELECT 1 FROM leases WHERE id = $1 FOR UPDATE", &[&id]).await?;
    let mut found = load_leases(tx, &[id]).await?;
    Ok(visible(found.pop(), id, project)?)
}

/// A window in which a whole lease would fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Availability {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// How far a lease could be extended on what it holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Extension {
    pub end: DateTime<Utc>,
    /// The latest end within the horizon; `None`: the horizon itself is free.
    pub latest_end: Option<DateTime<Utc>>,
    pub horizon: DateTime<Utc>,
}

/// Most start times advice tries.
const MAX_TRIES: usize = 5_000;

impl Store {
    /// The earliest windows of `duration` within `[from, until)` (each
    /// starting no later than `until - duration`) in which every reservation
    /// would fit together, at most `limit` of them. Reads only; locks nothing.
    pub async fn availability(
        &self,
        reservations: &[NewReservation],
        duration: chrono::Duration,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Availability>, Error> {
        let last_start = until.minus("until", duration)?;
        if last_start < from {
            return Err(Error::invalid(codes::INVALID_DATE, "the search range is shorter than the duration"));
        }
        crate::tx::command!(self, |tx| {
            let items: Vec<Item> = reservations.iter().map(|r| Item::Place(&r.demand, Vec::new())).collect();
            let span = Window { start: from, end: Some(until) };
            let g = gather(tx, &items, span, span, &[], false).await?;
            let ends = g.candidates.iter().flat_map(|c| c.holds.values().flatten().map(|h| h.0));
            let mut out = Vec::new();
            for start in schedule::start_times(ends, from, last_start).into_iter().take(MAX_TRIES) {
                let end = start.plus("end_date", duration)?;
                let window = Window { start, end: Some(end) };
                if decide(&mut g.clone(), &items, &[window]).is_ok() {
                    out.push(Availability { start, end });
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
    }

    /// The latest end the lease could be moved to, keeping every slot where
    /// it is, looking as far as `horizon`.
    pub async fn extension(&self, id: Uuid, project: Option<&str>, horizon: DateTime<Utc>) -> Result<Extension, Error> {
        crate::tx::command!(self, |tx| {
            let lease = visible(load_leases(tx, &[id]).await?.pop(), id, project)?.record;
            let own: Vec<Uuid> = lease.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
            let items: Vec<Item> = lease.reservations.iter().map(|r| Item::Fixed(&r.slots)).collect();
            let span = Window { start: lease.end, end: Some(horizon.max(lease.end)) };
            let g = gather(tx, &items, span, span, &own, false).await?;
            let mut latest: Option<DateTime<Utc>> = None;
            for s in lease.reservations.iter().flat_map(|r| r.slots.iter()) {
                let Some(c) = g.index.get(&s.provider).map(|&i| &g.candidates[i]) else {
                    continue;
                };
                for (class, used) in &s.resources {
                    let capacity = c.inventories.get(class).map(|i| i.capacity()).unwrap_or(0);
                    let holds = c.holds.get(class).map(Vec::as_slice).unwrap_or(&[]);
                    let first = schedule::first_conflict(holds, *used, capacity, lease.end, horizon)
                        .or((*used > capacity).then_some(lease.end));
                    if let Some(t) = first {
                        latest = Some(latest.map_or(t, |l| l.min(t)));
                    }
                }
            }
            Ok(Extension { end: lease.end, latest_end: latest, horizon })
        })
    }

    /// Creates a lease (or, when recurring, one lease per occurrence), all or
    /// nothing. Returns the ids of the leases made.
    pub async fn create_lease(&self, meta: &EventMeta, new: NewLease) -> Result<Vec<Uuid>, Error> {
        lease::check_name(&new.name)?;
        if new.reservations.len() > MAX_RESERVATIONS {
            return Err(Error::invalid(
                codes::INVALID_LEASE,
                format!("a lease carries at most {MAX_RESERVATIONS} reservations"),
            ));
        }
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            // Quota: the project's guard first.
            let quota_guards = crate::quota::lock(tx, std::slice::from_ref(&new.project_id)).await?;
            let (windows, before_end, recurring) = match &new.dates {
                LeaseDates::One { start, end, before_end } => {
                    let s = start.resolve(at);
                    let e = end.resolve(at);
                    lease::check_new_window(s, *start == DateSpec::Now, e, at)?;
                    let be = lease::before_end_time(s, e, *before_end)?;
                    (vec![(s, e)], Some(be), false)
                }
                LeaseDates::Recurring(occ) => {
                    for (s, e) in occ {
                        lease::check_new_window(*s, false, *e, at)?;
                    }
                    (occ.clone(), None, true)
                }
            };
            let names: Vec<String> = if recurring {
                (1..=windows.len()).map(|k| format!("{}-{k}", new.name)).collect()
            } else {
                vec![new.name.clone()]
            };
            check_name_free(tx, &new.project_id, &names, None).await?;
            let items: Vec<Item> = new.reservations.iter().map(|r| Item::Place(&r.demand, Vec::new())).collect();
            let wins: Vec<Window> = windows.iter().map(|(s, e)| Window { start: *s, end: Some(*e) }).collect();
            let types: Vec<&str> = new.reservations.iter().map(|r| r.resource_type.as_str()).collect();
            let placed = plan(tx, &items, &wins, &[]).await?.map_err(|u| unfit_error(u, &types, recurring))?;
            let recurrence_id = recurring.then(Uuid::new_v4);
            let mut events = Vec::new();
            let mut ids = Vec::new();
            for (k, ((start, end), per_item)) in windows.iter().zip(placed).enumerate() {
                let reservations = new
                    .reservations
                    .iter()
                    .zip(per_item)
                    .map(|(r, slots)| {
                        let id = Uuid::new_v4();
                        ReservationRecord {
                            id,
                            resource_type: r.resource_type.clone(),
                            resource_id: if matches!(r.demand, Demand::Hosts { .. }) { Uuid::new_v4() } else { id },
                            status: ReservationStatus::Pending,
                            params: r.params.clone(),
                            slots: slots
                                .into_iter()
                                .map(|p| Slot {
                                    consumer: Uuid::new_v4(),
                                    provider: p.provider,
                                    resources: p.resources,
                                })
                                .collect(),
                            created_at: at,
                        }
                    })
                    .collect();
                let be = before_end.map(Ok).unwrap_or_else(|| lease::before_end_time(*start, *end, None))?;
                let record = LeaseRecord {
                    id: Uuid::new_v4(),
                    name: names[k].clone(),
                    project_id: new.project_id.clone(),
                    user_id: new.user_id.clone(),
                    start: *start,
                    end: *end,
                    status: LeaseStatus::Pending,
                    degraded: false,
                    recurrence_id,
                    reservations,
                    events: lease::new_events(*start, be, *end),
                };
                ids.push(record.id);
                let slots = slot_events(&record, &HashMap::new(), at);
                // The class Placement requests name to draw from the reservation.
                events.extend(
                    record
                        .reservations
                        .iter()
                        .map(|r| Event::ResourceClassCreated { name: lease::reservation_class(r.id) }),
                );
                events.push(Event::LeaseCreated { lease: record, at });
                events.extend(slots);
            }
            // Quota: every slot of every lease made, and the leases themselves.
            crate::quota::Check::for_events(at, &events).run(tx, &quota_guards).await?;
            record(tx, meta, &events).await?;
            Ok(ids)
        })
    }

    /// Renames, moves and re-sizes a lease; everything that changes is
    /// re-checked over the new window, all or nothing.
    pub async fn update_lease(
        &self,
        meta: &EventMeta,
        id: Uuid,
        project: Option<&str>,
        update: LeaseUpdate,
    ) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let current = lock_lease(tx, id, project).await?.record;
            // Quota: the project's guard, before any consumer or provider.
            let quota_guards = crate::quota::lock(tx, std::slice::from_ref(&current.project_id)).await?;
            for r in &update.reservations {
                if !current.reservations.iter().any(|c| c.id == r.id) {
                    return Err(Error::invalid(
                        codes::INVALID_LEASE,
                        format!("lease {id} has no reservation {}", r.id),
                    )
                    .into());
                }
            }
            let change = LeaseChange {
                name: update.name.clone(),
                start: update.start.map(|s| s.resolve(at)),
                end: update.end.map(|e| e.resolve(at)),
                before_end: update.before_end,
                reservations: !update.reservations.is_empty(),
            };
            let (start, end) = lease::check_change(&current, &change, at)?;
            let mut next = current.clone();
            if let Some(name) = &update.name {
                check_name_free(tx, &current.project_id, std::slice::from_ref(name), Some(id)).await?;
                next.name = name.clone();
            }
            next.start = start;
            next.end = end;
            let window_moved = start != current.start || end != current.end;
            // Lease events follow the window unless they already ran.
            let before_end = match update.before_end {
                Some(t) => Some(lease::before_end_time(start, end, Some(t))?),
                None if window_moved => Some(lease::before_end_time(start, end, None)?),
                None => None,
            };
            for e in next.events.iter_mut() {
                let t = match e.event_type {
                    LeaseEventType::StartLease => Some(start),
                    LeaseEventType::EndLease => Some(end),
                    LeaseEventType::BeforeEndLease => before_end,
                };
                if let Some(t) = t {
                    if e.status == LeaseEventStatus::Undone {
                        e.time = t;
                    }
                }
            }
            let mut events = Vec::new();
            if window_moved || !update.reservations.is_empty() {
                let slot_ids: Vec<Uuid> =
                    current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
                // Consumers drawing from the slots count as part of them.
                let mut drawers: Vec<Uuid> = draws_of(tx, &slot_ids).await?.iter().map(|d| d.1).collect();
                drawers.sort();
                drawers.dedup();
                let mut lock: Vec<Uuid> = slot_ids.iter().chain(&drawers).copied().collect();
                lock.sort();
                tx.query("SELECT 1 FROM consumers WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE", &[&lock]).await?;
                let draws = draws_of(tx, &slot_ids).await?;
                let mut drawn: HashMap<Uuid, BTreeMap<String, i64>> = HashMap::new();
                for (slot, _, res) in &draws {
                    for (k, v) in res {
                        *drawn.entry(*slot).or_default().entry(k.clone()).or_default() += v;
                    }
                }
                let changed: HashMap<Uuid, &ReservationUpdate> =
                    update.reservations.iter().map(|r| (r.id, r)).collect();
                let items: Vec<Item> = current
                    .reservations
                    .iter()
                    .map(|r| match changed.get(&r.id) {
                        Some(u) => Item::Place(&u.demand, r.slots.iter().map(|s| s.provider).collect()),
                        None => Item::Fixed(&r.slots),
                    })
                    .collect();
                let own: Vec<Uuid> = slot_ids.iter().chain(draws.iter().map(|d| &d.1)).copied().collect();
                let types: Vec<&str> = current.reservations.iter().map(|r| r.resource_type.as_str()).collect();
                let window = Window { start, end: Some(end) };
                let mut placed = plan(tx, &items, &[window], &own).await?.map_err(|u| unfit_error(u, &types, false))?;
                let per_item = placed.pop().expect("one window");
                for (r, slots) in next.reservations.iter_mut().zip(per_item) {
                    if let Some(u) = changed.get(&r.id) {
                        r.params = u.params.clone();
                        // Keep a slot's consumer where it stays on the same provider.
                        let mut old: Vec<Slot> = r.slots.clone();
                        r.slots = slots
                            .into_iter()
                            .map(|p| match old.iter().position(|s| s.provider == p.provider) {
                                Some(i) => Slot { resources: p.resources, ..old.remove(i) },
                                None => Slot { consumer: Uuid::new_v4(), provider: p.provider, resources: p.resources },
                            })
                            .collect();
                        if let Some(s) = old.iter().find(|s| drawn.contains_key(&s.consumer)) {
                            return Err(Error::conflict(
                                codes::LEASE_STARTED,
                                format!("the slot on {} is in use by a consumer; it cannot be given up", s.provider),
                            )
                            .into());
                        }
                        events.extend(old.iter().map(|s| released(s.consumer, &current, at)));
                    }
                }
                events.extend(slot_events(&next, &drawn, at));
                if end != current.end {
                    let providers: Vec<Uuid> =
                        current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.provider)).collect();
                    for c in &drawers {
                        events.extend(follow_end(tx, *c, &providers, current.end, end, at).await?);
                    }
                }
            }
            events.insert(0, Event::LeaseUpdated { lease: next, at });
            // Quota: the slots' new holds against those they replace.
            crate::quota::Check::for_events(at, &events).run(tx, &quota_guards).await?;
            record(tx, meta, &events).await?;
            Ok(())
        })
    }

    /// Deletes a lease and frees what it held at once.
    pub async fn delete_lease(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let current = lock_lease(tx, id, project).await?.record;
            lock_slot_consumers(tx, &current).await?;
            let mut providers: Vec<Uuid> =
                current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.provider)).collect();
            providers.sort();
            providers.dedup();
            tx.query("SELECT 1 FROM providers WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE", &[&providers]).await?;
            let mut events = vec![Event::LeaseDeleted { id, at }];
            for r in &current.reservations {
                let name = lease::reservation_class(r.id);
                let in_use = tx
                    .query_opt(
                        "SELECT 1 FROM resource_classes WHERE name = $1
                         AND NOT EXISTS (SELECT 1 FROM inventories WHERE resource_class = $1)
                         AND NOT EXISTS (SELECT 1 FROM allocations WHERE resource_class = $1)",
                        &[&name],
                    )
                    .await?;
                if in_use.is_some() {
                    events.push(Event::ResourceClassDeleted { name });
                }
            }
            events.extend(
                current.reservations.iter().flat_map(|r| r.slots.iter()).map(|s| released(s.consumer, &current, at)),
            );
            // A host lease deleted while it runs: its end will not fire, so
            // its hosts leave its pool for the free pool here.
            let pools: Vec<Uuid> = current
                .reservations
                .iter()
                .filter(|r| !r.slots.is_empty() && r.resource_type == "physical:host")
                .map(|r| r.resource_id)
                .collect();
            if !pools.is_empty() {
                for r in tx
                    .query(
                        "SELECT provider_uuid, array_agg(aggregate) FROM provider_aggregates
                         WHERE provider_uuid = ANY($1) GROUP BY 1 ORDER BY 1",
                        &[&providers],
                    )
                    .await?
                {
                    let aggregates: Vec<Uuid> = r.get(1);
                    let mut aggregates: BTreeSet<Uuid> = aggregates.into_iter().collect();
                    let before = aggregates.len();
                    aggregates.retain(|a| !pools.contains(a));
                    if aggregates.len() != before {
                        aggregates.insert(lease::FREE_POOL);
                        events.push(Event::ProviderAggregatesReplaced {
                            provider: r.get(0),
                            aggregates,
                            bump: true,
                            at,
                        });
                    }
                }
            }
            record(tx, meta, &events).await?;
            Ok(())
        })
    }
}
