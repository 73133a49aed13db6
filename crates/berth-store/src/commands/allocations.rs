//! Replacing consumers' allocation sets (a claim, a move, a resize, a
//! delete, several consumers at once) and reshaping provider trees: each is
//! all-or-nothing, and capacity is checked at every instant of every window.
//!
//! Generations follow Placement: a request bumps each consumer it writes
//! once, and each provider it allocates from (or empties a consumer from)
//! once, whatever the number of consumers; a plain delete bumps no provider.
//! Error details use Placement's wording.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::error::codes;
use berth_core::event::Allocation;
use berth_core::timeline;
use berth_core::{Error, Event, EventMeta, Inventory, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{now, record};
use crate::lock::{self, Sorted};
use crate::{quota, sql, Store, StoreError};

#[cfg(test)]
mod plan_tests;

/// What the client says about the consumer's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationCheck {
    /// Do not compare (Placement before 1.28, or a delete).
    Any,
    /// The consumer must not exist yet (`consumer_generation: null`).
    New,
    /// The consumer must be at this generation.
    Exactly(i64),
}

/// One consumer's whole new allocation set.
#[derive(Debug, Clone)]
pub struct ConsumerAllocations {
    pub consumer: Uuid,
    pub project_id: String,
    pub user_id: String,
    /// `None` keeps an existing consumer's type (a new consumer is untyped).
    pub consumer_type: Option<String>,
    pub generation: GenerationCheck,
    /// Empty: the consumer's allocations are removed.
    pub allocations: Vec<Allocation>,
}

/// A provider's new inventory within a reshape.
#[derive(Debug, Clone)]
pub struct ReshapeInventory {
    pub provider: Uuid,
    pub expected_generation: i64,
    pub inventories: BTreeMap<String, Inventory>,
}

/// The code of "no such resource class" (a 400 in Placement).
pub const RESOURCE_CLASS_NOT_FOUND: &str = "placement.resource_class.not_found";
/// The code of "no such resource provider" where a request names one.
pub const PROVIDER_NOT_FOUND: &str = "placement.resource_provider.not_found";

impl Store {
    /// Replaces the allocation sets of all `consumers` in one transaction.
    pub async fn replace_allocations(
        &self,
        meta: &EventMeta,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<(), Error> {
        check_batch_shape(&consumers)?;
        // Reservation classes draw from their reservation's hold (see
        // consume.rs). Most requests neither name one nor hold a draw: they
        // are decided together with other requests in flight (see claims.rs),
        // which finds out (with the consumers locked) whether they hold one;
        // if so, nothing is written and the request goes the drawing way.
        if !super::consume::names_reservation(&consumers) {
            match self.claims.submit(self, meta, consumers.clone()).await? {
                Decision::Written => return Ok(()),
                Decision::Refused(e) => return Err(e),
                Decision::HoldsDraw => {}
            }
        }
        crate::tx::command!(self, |tx| {
            let consumers = super::consume::draw_from_holds(tx, meta, consumers.clone()).await?;
            write_one(tx, meta, &consumers, &[], false).await.map(|_| ())
        })
    }

    /// Removes every allocation of `consumer` (and so the consumer). Bumps no
    /// provider generation. Not found when it holds nothing.
    pub async fn delete_allocations(&self, meta: &EventMeta, consumer: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let Some(row) = crate::lock::consumers(tx, &[consumer]).await?.into_iter().next() else {
                return Err(
                    Error::not_found(codes::NOT_FOUND, format!("No allocations for consumer '{consumer}'")).into()
                );
            };
            let event = Event::AllocationsReplaced {
                consumer,
                project_id: row.get(1),
                user_id: row.get(2),
                consumer_type: row.get(3),
                allocations: Vec::new(),
                providers_bumped: Some(Vec::new()),
                at: now(tx).await?,
            };
            record(tx, meta, &[event]).await?;
            Ok(())
        })
    }

    /// Replaces the inventories of several providers and the allocations of
    /// several consumers together: the state between the two never exists.
    /// As in Placement, each reshaped provider first gets an interim
    /// inventory (its new classes plus the ones it drops), the allocations
    /// are written against that, then the final inventory replaces it; a
    /// dropped class must be left without allocations.
    pub async fn reshape(
        &self,
        meta: &EventMeta,
        inventories: Vec<ReshapeInventory>,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<(), Error> {
        check_batch_shape(&consumers)?;
        for r in &inventories {
            for (class, inv) in &r.inventories {
                inv.validate(class)?;
            }
        }
        crate::tx::command!(self, |tx| { write_one(tx, meta, &consumers, &inventories, false).await.map(|_| ()) })
    }
}

fn check_batch_shape(consumers: &[ConsumerAllocations]) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    for c in consumers {
        if !seen.insert(c.consumer) {
            return Err(Error::invalid(codes::INVALID, format!("consumer {} appears twice", c.consumer)));
        }
        for a in &c.allocations {
            if a.used < 1 {
                return Err(Error::invalid(
                    codes::INVALID,
                    format!("allocation of {} on {} must be at least 1, got {}", a.resource_class, a.provider, a.used),
                ));
            }
        }
    }
    Ok(())
}

type Key = (Uuid, String);

// Everyone else's holds on each (provider, class) asked about, over the
// window asked about, in three kinds of row:
// 0. bounded holds (leases) overlapping the window, clipped to it and summed
//    by clipped window (the peak is the same);
// 1. open-ended holds that start inside the window or after it, one by one,
//    with their consumer;
// 2. the sum of all open-ended holds (provider_open_usage).
// The open-ended holds that began before the window are kind 2 less kind 1
// less the batch's own (known from its locked consumers): one hold over the
// whole window. So a claim reads a few rows however many claims came before.
// Each (provider, class) probes its indexes on its own (lateral subqueries
// kept apart by `OFFSET 0`): the statement runs on a generic plan, and a
// join the planner may pick from stale statistics would scan instead.
const READ_OTHERS: &str = "WITH q AS MATERIALIZED (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS q(p, rc, s, e))
     SELECT 0, q.p, q.rc, greatest(lower(a.during), q.s),
            CASE WHEN q.e IS NULL THEN upper(a.during) ELSE least(upper(a.during), q.e) END,
            sum(a.used)::int8, NULL::uuid
     FROM q CROSS JOIN LATERAL (
         SELECT a.during, a.used FROM allocations a
         WHERE a.provider_uuid = q.p AND a.resource_class = q.rc AND a.during && tstzrange(q.s, q.e, '[)')
           AND NOT upper_inf(a.during) AND a.consumer_uuid <> ALL($5)
         OFFSET 0) AS a
     GROUP BY 2, 3, 4, 5
     UNION ALL
     SELECT 1, q.p, q.rc, lower(a.during), NULL, a.used, a.consumer_uuid
     FROM q CROSS JOIN LATERAL (
         SELECT a.during, a.used, a.consumer_uuid FROM allocations a
         WHERE a.provider_uuid = q.p AND a.resource_class = q.rc AND upper_inf(a.during) AND lower(a.during) >= q.s
         OFFSET 0) AS a
     UNION ALL
     SELECT 2, u.provider_uuid, u.resource_class, NULL, NULL, u.used, NULL
     FROM q JOIN provider_open_usage u ON u.provider_uuid = q.p AND u.resource_class = q.rc";

const KNOWN_CLASSES: &str = "SELECT name FROM resource_classes WHERE name = ANY($1)";

fn show_generation(g: Option<i64>) -> String {
    g.map(|g| g.to_string()).unwrap_or_else(|| "null".into())
}

/// One request of a batch: decided on its own, written all or nothing.
pub(crate) struct Request<'a> {
    pub meta: &'a EventMeta,
    pub consumers: &'a [ConsumerAllocations],
}

/// What became of one request of a batch.
#[derive(Debug)]
pub(crate) enum Decision {
    Written,
    /// Nothing written: a consumer holds a reservation draw, and replacing
    /// its allocations must give the draw back (consume.rs).
    HoldsDraw,
    Refused(Error),
}

/// Writes one request alone; with `unless_drawing`, writes nothing and
/// answers false when a consumer holds a draw.
async fn write_one(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    consumers: &[ConsumerAllocations],
    reshaped: &[ReshapeInventory],
    unless_drawing: bool,
) -> Result<bool, StoreError> {
    let request = Request { meta, consumers };
    let decision = write_allocations(tx, std::slice::from_ref(&request), reshaped, unless_drawing).await?;
    match decision.into_iter().next() {
        Some(Decision::Written) => Ok(true),
        Some(Decision::HoldsDraw) => Ok(false),
        Some(Decision::Refused(e)) => Err(e.into()),
        None => unreachable!("one decision per request"),
    }
}

/// A consumer's holds as this batch stands: what it held when locked, or
/// the new ones once its request is decided.
type Held = Vec<(Key, Window, i64)>;

/// Decides `requests` in order, each on its own, with everything read once
/// for all of them: a request sees the holds of the requests accepted
/// before it. Writes the accepted ones. A reshape is a batch of one.
pub(crate) async fn write_allocations(
    tx: &Transaction<'_>,
    requests: &[Request<'_>],
    reshaped: &[ReshapeInventory],
    unless_drawing: bool,
) -> Result<Vec<Decision>, StoreError> {
    debug_assert!(reshaped.is_empty() || requests.len() == 1, "a reshape is decided alone");
    let at = now(tx).await?;
    let all: Vec<&ConsumerAllocations> = requests.iter().flat_map(|r| r.consumers.iter()).collect();
    let consumer_ids: Sorted<Uuid> = all.iter().map(|c| c.consumer).collect();
    // The new holds, by provider and class, known from the requests alone.
    let mut wanted: BTreeMap<Key, Vec<(Window, i64)>> = BTreeMap::new();
    for c in &all {
        for a in &c.allocations {
            wanted.entry((a.provider, a.resource_class.clone())).or_default().push((a.window, a.used));
        }
    }
    let mut providers: BTreeSet<Uuid> = wanted.keys().map(|k| k.0).collect();
    providers.extend(reshaped.iter().map(|r| r.provider));
    let provider_ids: Sorted<Uuid> = providers.iter().copied().collect();
    let mut keys_p = Vec::new();
    let mut keys_c = Vec::new();
    let mut keys_s: Vec<DateTime<Utc>> = Vec::new();
    let mut keys_e: Vec<Option<DateTime<Utc>>> = Vec::new();
    for ((p, c), holds) in &wanted {
        let span = timeline::span(holds).expect("holds are not empty");
        keys_p.push(*p);
        keys_c.push(c.as_str());
        keys_s.push(span.start);
        keys_e.push(span.end);
    }

    // 1. Statements sent together (pipelined on the connection); the
    //    server runs them in order, so the reads after the locks see every
    //    earlier writer's committed rows:
    //    a. lock the projects' quota guards, then the consumers, sorted, with
    //       what they hold (which cannot change while we hold them);
    //    b. lock the providers of the new holds and those the consumers hold
    //       now (they get a new generation too), sorted, with their inventories;
    //    c. everyone else's holds over the new windows (READ_OTHERS: bounded
    //       ones clipped and summed, open-ended ones as their sum and the few
    //       that start inside the window);
    //    d. the classes named, the limits and the usage that bear on them.
    let consumers = lock::consumers_holding(&consumer_ids);
    let providers = lock::providers_with_inventories(&provider_ids, &consumer_ids);
    let consumer_params: [&(dyn ToSql + Sync); 1] = [consumer_ids.param()];
    let other_params: [&(dyn ToSql + Sync); 5] = [&keys_p, &keys_c, &keys_s, &keys_e, consumer_ids.param()];
    let mut named: BTreeSet<&str> = wanted.keys().map(|k| k.1.as_str()).collect();
    for r in reshaped {
        named.extend(r.inventories.keys().map(String::as_str));
    }
    let named: Vec<&str> = named.into_iter().collect();
    let class_params: [&(dyn ToSql + Sync); 1] = [&named];
    // Quota: the projects' guards are locked first, their limits and usage read last (crate::quota).
    let claims = all.iter().map(|c| (c.consumer, &*c.project_id, &*c.user_id, &*c.allocations));
    let quota = quota::Check::new(at, claims, Default::default());
    let q = quota.params();
    let [_, _, guard_rows, consumer_rows, draw_rows, provider_rows, other_rows, class_rows, limit_rows, usage_rows] =
        sql::pipeline(
            tx,
            [
                (sql::GENERIC_PLANS, &[]),
                (lock::GUARD_INSERT, &q.guard[..]),
                (lock::GUARD_LOCK, &q.guard[..]),
                (consumers.0, &consumers.1[..]),
                (super::consume::HOLDS_DRAWS, &consumer_params[..]),
                (providers.0, &providers.1[..]),
                (READ_OTHERS, &other_params[..]),
                (KNOWN_CLASSES, &class_params[..]),
                (quota::LIMITS, &q.limits[..]),
                (quota::USAGE, &q.usage[..]),
            ],
        )
        .await?;
    let drawing: BTreeSet<Uuid> = draw_rows.iter().map(|r| r.get(0)).collect();

    let mut current: HashMap<Uuid, (i64, Option<String>)> = HashMap::new();
    let mut held: HashMap<Uuid, Held> = HashMap::new();
    for r in &consumer_rows {
        current.insert(r.get(0), (r.get(1), r.get(7)));
        if let Some(provider) = r.get::<_, Option<Uuid>>(2) {
            let window = Window { start: r.get(5), end: r.get(6) };
            held.entry(r.get(0)).or_default().push(((provider, r.get(3)), window, r.get(4)));
        }
    }
    let mut generations: HashMap<Uuid, i64> = HashMap::new();
    let mut inventories: HashMap<Key, Inventory> = HashMap::new();
    for r in &provider_rows {
        generations.insert(r.get(0), r.get(1));
        if let Some(class) = r.get::<_, Option<String>>(2) {
            let inv = Inventory {
                total: r.get(3),
                reserved: r.get(4),
                min_unit: r.get(5),
                max_unit: r.get(6),
                step_size: r.get(7),
                allocation_ratio: r.get(8),
            };
            inventories.insert((r.get(0), class), inv);
        }
    }
    let known: BTreeSet<String> = class_rows.iter().map(|r| r.get(0)).collect();
    // 2. Inventories as the allocations see them (in a reshape: the interim
    //    union of the new classes and the dropped ones).
    let mut interim: Vec<(Uuid, BTreeMap<String, Inventory>)> = Vec::new();
    for r in reshaped {
        if r.inventories.is_empty() {
            continue;
        }
        for (class, inv) in &r.inventories {
            inventories.insert((r.provider, class.clone()), *inv);
        }
        let union: BTreeMap<String, Inventory> = inventories
            .iter()
            .filter(|((p, _), _)| *p == r.provider)
            .map(|((_, class), inv)| (class.clone(), *inv))
            .collect();
        interim.push((r.provider, union));
    }
    let others = others_by_key(&other_rows, &keys_p, &keys_c, &keys_s, &keys_e, &held);
    let limited = quota.limits(tx, &guard_rows, limit_rows, usage_rows).await?;
    let read = Read { current: &current, generations: &generations, inventories: &inventories, known: &known, others };

    // 3. Decide each request in turn; an accepted one's holds replace what
    //    its consumers held for the requests after it.
    let mut decisions = Vec::with_capacity(requests.len());
    let mut events: Vec<(&EventMeta, Event)> = interim
        .into_iter()
        .map(|(provider, inventories)| (requests[0].meta, Event::InventoriesReplaced { provider, inventories, at }))
        .collect();
    let mut accepted: Vec<quota::Accepted<'_>> = Vec::new();
    for request in requests {
        if unless_drawing && request.consumers.iter().any(|c| drawing.contains(&c.consumer)) {
            decisions.push(Decision::HoldsDraw);
            continue;
        }
        let verdict = read.decide(request.consumers, &held, reshaped).and_then(|()| match &limited {
            Some(limited) => limited.check(&quota_holds(request.consumers), &ids(request.consumers), &accepted),
            None => Ok(()),
        });
        if let Err(e) = verdict {
            decisions.push(Decision::Refused(e));
            continue;
        }
        let mut bumped: BTreeSet<Uuid> = BTreeSet::new();
        for c in request.consumers {
            let mut mine: BTreeSet<Uuid> = c.allocations.iter().map(|a| a.provider).collect();
            if c.allocations.is_empty() {
                mine.extend(held.get(&c.consumer).into_iter().flatten().map(|h| h.0 .0));
            }
            let providers_bumped: Vec<Uuid> = mine.into_iter().filter(|p| bumped.insert(*p)).collect();
            let consumer_type = c.consumer_type.clone().or_else(|| current.get(&c.consumer).and_then(|x| x.1.clone()));
            events.push((
                request.meta,
                Event::AllocationsReplaced {
                    consumer: c.consumer,
                    project_id: c.project_id.clone(),
                    user_id: c.user_id.clone(),
                    consumer_type,
                    allocations: c.allocations.clone(),
                    providers_bumped: Some(providers_bumped),
                    at,
                },
            ));
            held.insert(
                c.consumer,
                c.allocations.iter().map(|a| ((a.provider, a.resource_class.clone()), a.window, a.used)).collect(),
            );
            accepted.push(quota::Accepted {
                consumer: c.consumer,
                project: &c.project_id,
                user: &c.user_id,
                allocations: &c.allocations,
            });
        }
        decisions.push(Decision::Written);
    }
    // 4. A reshape's final inventories may drop a class only when nothing
    //    holds it any more (other consumers now or later, or this request).
    if matches!(decisions.first(), Some(Decision::Written)) {
        for r in reshaped {
            check_dropped_classes(tx, r, requests[0].consumers, &consumer_ids).await?;
        }
        events.extend(reshaped.iter().map(|r| {
            (
                requests[0].meta,
                Event::InventoriesReplaced { provider: r.provider, inventories: r.inventories.clone(), at },
            )
        }));
    }
    // 5. Record what was accepted (a reshape: interim inventories, every
    //    consumer, final inventories).
    if decisions.iter().any(|d| matches!(d, Decision::Written)) {
        super::record_each(tx, &events).await?;
    }
    Ok(decisions)
}

/// Everyone else's holds by provider and class, from the rows of
/// [`READ_OTHERS`] for the keys asked about; `held`: what the batch's own
/// consumers hold (they are not "everyone else").
fn others_by_key(
    rows: &[tokio_postgres::Row],
    keys_p: &[Uuid],
    keys_c: &[&str],
    keys_s: &[DateTime<Utc>],
    keys_e: &[Option<DateTime<Utc>>],
    held: &HashMap<Uuid, Held>,
) -> HashMap<Key, Vec<(Window, i64)>> {
    let mut others: HashMap<Key, Vec<(Window, i64)>> = HashMap::new();
    // Open-ended holds that began before the window, by key.
    let mut before: HashMap<Key, i64> = HashMap::new();
    for r in rows {
        let key: Key = (r.get(1), r.get(2));
        let used: i64 = r.get(5);
        match r.get::<_, i32>(0) {
            0 => others.entry(key).or_default().push((Window { start: r.get(3), end: r.get(4) }, used)),
            1 => {
                *before.entry(key.clone()).or_default() -= used;
                let consumer: Uuid = r.get(6);
                if !held.contains_key(&consumer) {
                    others.entry(key).or_default().push((Window { start: r.get(3), end: None }, used));
                }
            }
            _ => *before.entry(key).or_default() += used,
        }
    }
    for (i, (p, c)) in keys_p.iter().zip(keys_c).enumerate() {
        let key: Key = (*p, c.to_string());
        let (start, end) = (keys_s[i], keys_e[i]);
        let own: i64 = held
            .values()
            .flatten()
            .filter(|(k, w, _)| *k == key && w.end.is_none() && w.start < start)
            .map(|(_, _, used)| used)
            .sum();
        let earlier = before.remove(&key).unwrap_or(0) - own;
        if earlier > 0 {
            others.entry(key).or_default().push((Window { start, end }, earlier));
        }
    }
    others
}

fn ids(consumers: &[ConsumerAllocations]) -> Vec<Uuid> {
    consumers.iter().map(|c| c.consumer).collect()
}

/// New holds by project, user and class, as the quota check takes them.
fn quota_holds(consumers: &[ConsumerAllocations]) -> BTreeMap<(String, String, String), quota::Holds> {
    let mut out: BTreeMap<(String, String, String), quota::Holds> = BTreeMap::new();
    for c in consumers {
        for a in &c.allocations {
            out.entry((c.project_id.clone(), c.user_id.clone(), a.resource_class.clone()))
                .or_default()
                .push((a.window, a.used));
        }
    }
    out
}

/// What a batch read, once for all its requests.
struct Read<'a> {
    current: &'a HashMap<Uuid, (i64, Option<String>)>,
    generations: &'a HashMap<Uuid, i64>,
    inventories: &'a HashMap<Key, Inventory>,
    known: &'a BTreeSet<String>,
    /// Holds of consumers outside the batch, by provider and class.
    others: HashMap<Key, Vec<(Window, i64)>>,
}

impl Read<'_> {
    /// Whether one request may be written, with the batch's consumers
    /// holding `held`. A reshape moves inventory, so nothing its consumers
    /// held before excuses it.
    fn decide(
        &self,
        consumers: &[ConsumerAllocations],
        held: &HashMap<Uuid, Held>,
        reshaped: &[ReshapeInventory],
    ) -> Result<(), Error> {
        for c in consumers {
            let actual = self.current.get(&c.consumer).map(|x| x.0);
            let given = match c.generation {
                GenerationCheck::Any => continue,
                GenerationCheck::New => None,
                GenerationCheck::Exactly(g) => Some(g),
            };
            if actual != given {
                return Err(Error::generation(format!(
                    "consumer generation conflict - expected {} but got {}",
                    show_generation(actual),
                    show_generation(given)
                )));
            }
        }
        for r in reshaped {
            match self.generations.get(&r.provider) {
                None => {
                    return Err(Error::invalid(
                        PROVIDER_NOT_FOUND,
                        format!("Resource provider {} in inventories not found", r.provider),
                    ))
                }
                Some(g) if *g != r.expected_generation => {
                    return Err(Error::generation(format!(
                        "resource provider generation conflict for provider {}: actual: {g}, given: {}",
                        r.provider, r.expected_generation
                    )))
                }
                Some(_) => {}
            }
        }
        let mut wanted: BTreeMap<Key, Vec<(Window, i64)>> = BTreeMap::new();
        for c in consumers {
            for a in &c.allocations {
                wanted.entry((a.provider, a.resource_class.clone())).or_default().push((a.window, a.used));
            }
        }
        if let Some((missing, _)) = wanted.keys().find(|k| !self.generations.contains_key(&k.0)) {
            return Err(Error::invalid(
                PROVIDER_NOT_FOUND,
                format!("Allocation for resource provider '{missing}' that does not exist."),
            ));
        }
        // Every class named, by an allocation or by a reshaped inventory.
        let mut named: BTreeSet<&str> = wanted.keys().map(|k| k.1.as_str()).collect();
        named.extend(reshaped.iter().flat_map(|r| r.inventories.keys().map(String::as_str)));
        if let Some(unknown) = named.iter().find(|n| !self.known.contains(**n)) {
            return Err(Error::invalid(RESOURCE_CLASS_NOT_FOUND, format!("No such resource class {unknown}.")));
        }
        // Each amount within its inventory's units.
        for c in consumers {
            for a in &c.allocations {
                let Some(inv) = self.inventories.get(&(a.provider, a.resource_class.clone())) else {
                    return Err(Error::capacity(format!(
                        "Inventory for '{}' on resource provider '{}' invalid.",
                        a.resource_class, a.provider
                    )));
                };
                if inv.check_amount(&a.provider.to_string(), &a.resource_class, a.used).is_err() {
                    return Err(Error::capacity(format!(
                        "Unable to create allocation for '{}' on resource provider '{}'. \
                         The requested amount would violate inventory constraints.",
                        a.resource_class, a.provider
                    )));
                }
            }
        }
        // Every instant of every new window stays within capacity, unless
        // the request raises what its consumers held at no instant.
        let mine: BTreeSet<Uuid> = consumers.iter().map(|c| c.consumer).collect();
        for (key, holds) in &wanted {
            let mut others = self.others.get(key).cloned().unwrap_or_default();
            let mut before = Vec::new();
            for (consumer, hs) in held {
                for (k, w, used) in hs {
                    if k != key {
                        continue;
                    }
                    if !mine.contains(consumer) {
                        others.push((*w, *used));
                    } else if reshaped.is_empty() {
                        before.push((*w, *used));
                    }
                }
            }
            if !timeline::fits(&others, &before, holds, self.inventories[key].capacity()) {
                return Err(Error::capacity(format!(
                    "Unable to create allocation for '{}' on resource provider '{}'. \
                     The requested amount would exceed the capacity.",
                    key.1, key.0
                )));
            }
        }
        Ok(())
    }
}

/// Classes a reshape drops from a provider must be left without
/// allocations: neither other consumers' (held now or later) nor the ones
/// this reshape writes.
async fn check_dropped_classes(
    tx: &Transaction<'_>,
    r: &ReshapeInventory,
    consumers: &[ConsumerAllocations],
    moving: &[Uuid],
) -> Result<(), StoreError> {
    let kept: Vec<&str> = r.inventories.keys().map(String::as_str).collect();
    let mut in_use: BTreeSet<String> = tx
        .query(
            "SELECT DISTINCT resource_class FROM allocations
             WHERE provider_uuid = $1 AND NOT (resource_class = ANY($2)) AND consumer_uuid <> ALL($3)
               AND (upper(during) IS NULL OR upper(during) > now())",
            &[&r.provider, &kept, &moving],
        )
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    for c in consumers {
        for a in &c.allocations {
            if a.provider == r.provider && !r.inventories.contains_key(&a.resource_class) {
                in_use.insert(a.resource_class.clone());
            }
        }
    }
    if !in_use.is_empty() {
        let classes = super::in_standard_order(in_use);
        return Err(Error::in_use(
            codes::INVENTORY_IN_USE,
            format!("Inventory for '{}' on resource provider '{}' in use.", classes.join(", "), r.provider),
        )
        .into());
    }
    Ok(())
}
