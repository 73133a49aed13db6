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
use crate::{quota, sql, Store, StoreError};

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
        // consume.rs). Most batches neither name one nor hold a draw: they
        // go straight to the write, which finds out (with the consumers
        // locked) whether they hold one; if so, nothing is written and the
        // batch goes the drawing way.
        if !super::consume::names_reservation(&consumers) {
            let written = crate::tx::command!(self, |tx| { write_allocations(tx, meta, &consumers, &[], true).await })?;
            if written {
                return Ok(());
            }
        }
        crate::tx::command!(self, |tx| {
            let consumers = super::consume::draw_from_holds(tx, meta, consumers.clone()).await?;
            write_allocations(tx, meta, &consumers, &[], false).await.map(|_| ())
        })
    }

    /// Removes every allocation of `consumer` (and so the consumer). Bumps no
    /// provider generation. Not found when it holds nothing.
    pub async fn delete_allocations(&self, meta: &EventMeta, consumer: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let row = tx
                .query_opt(
                    "SELECT project_id, user_id, consumer_type FROM consumers WHERE uuid = $1 FOR UPDATE",
                    &[&consumer],
                )
                .await?;
            let Some(row) = row else {
                return Err(
                    Error::not_found(codes::NOT_FOUND, format!("No allocations for consumer '{consumer}'")).into()
                );
            };
            let event = Event::AllocationsReplaced {
                consumer,
                project_id: row.get(0),
                user_id: row.get(1),
                consumer_type: row.get(2),
                allocations: Vec::new(),
                providers_bumped: Some(Vec::new()),
                at: now(),
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
        crate::tx::command!(self, |tx| {
            write_allocations(tx, meta, &consumers, &inventories, false).await.map(|_| ())
        })
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

const LOCK_CONSUMERS: &str = "SELECT c.uuid, c.generation, a.provider_uuid, a.resource_class, a.used,
            lower(a.during), upper(a.during), c.consumer_type
     FROM consumers c LEFT JOIN allocations a ON a.consumer_uuid = c.uuid
     WHERE c.uuid = ANY($1) ORDER BY c.uuid FOR UPDATE OF c";

// One array of keys (not `uuid = ANY($1) OR uuid IN (...)`), so the
// providers are found by their key however many there are.
const LOCK_PROVIDERS: &str =
    "SELECT p.uuid, p.generation, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
            i.allocation_ratio
     FROM providers p LEFT JOIN inventories i ON i.provider_uuid = p.uuid
     WHERE p.uuid = ANY($1::uuid[] || ARRAY(SELECT provider_uuid FROM allocations WHERE consumer_uuid = ANY($2)))
     ORDER BY p.uuid FOR UPDATE OF p";

// Each (provider, class) probes the timeline index on its own (a lateral
// subquery kept apart by `OFFSET 0`): the statement runs on a generic plan,
// and a join the planner may pick from stale statistics would scan every
// allocation instead.
const READ_OTHERS: &str = "SELECT q.p, q.rc, greatest(lower(a.during), q.s) AS s,
            CASE WHEN q.e IS NULL THEN upper(a.during)
             WHEN upper(a.during) IS NULL THEN q.e
             ELSE least(upper(a.during), q.e) END AS e,
            sum(a.used)::int8
     FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS q(p, rc, s, e)
     CROSS JOIN LATERAL (
         SELECT a.during, a.used FROM allocations a
         WHERE a.provider_uuid = q.p AND a.resource_class = q.rc AND a.during && tstzrange(q.s, q.e, '[)')
           AND a.consumer_uuid <> ALL($5)
         OFFSET 0) AS a
     GROUP BY 1, 2, 3, 4";

const KNOWN_CLASSES: &str = "SELECT name FROM resource_classes WHERE name = ANY($1)";

fn show_generation(g: Option<i64>) -> String {
    g.map(|g| g.to_string()).unwrap_or_else(|| "null".into())
}

/// Writes the batch; with `unless_drawing`, writes nothing and answers
/// false when a consumer holds a draw (it must go through consume.rs).
async fn write_allocations(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    consumers: &[ConsumerAllocations],
    reshaped: &[ReshapeInventory],
    unless_drawing: bool,
) -> Result<bool, StoreError> {
    let at = now();
    let mut consumer_ids: Vec<Uuid> = consumers.iter().map(|c| c.consumer).collect();
    consumer_ids.sort();
    // The new holds, by provider and class, known from the request alone.
    let mut wanted: BTreeMap<Key, Vec<(Window, i64)>> = BTreeMap::new();
    for c in consumers {
        for a in &c.allocations {
            wanted.entry((a.provider, a.resource_class.clone())).or_default().push((a.window, a.used));
        }
    }
    let mut providers: BTreeSet<Uuid> = wanted.keys().map(|k| k.0).collect();
    providers.extend(reshaped.iter().map(|r| r.provider));
    let provider_ids: Vec<Uuid> = providers.iter().copied().collect();
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

    // 1. Three statements sent together (pipelined on the connection); the
    //    server runs them in order, so the last one reads after both locks
    //    are held and sees every earlier writer's committed rows:
    //    a. lock the consumers, sorted, with what they hold (which cannot
    //       change while we hold them);
    //    b. lock the providers of the new holds and those the consumers hold
    //       now (they get a new generation too), sorted, with their inventories;
    //    c. everyone else's holds overlapping the new windows, clipped to the
    //       window asked about and summed by clipped window: the peak is the
    //       same, and open-ended holds that began earlier collapse into one row.
    let consumer_params: [&(dyn ToSql + Sync); 1] = [&consumer_ids];
    let provider_params: [&(dyn ToSql + Sync); 2] = [&provider_ids, &consumer_ids];
    let other_params: [&(dyn ToSql + Sync); 5] = [&keys_p, &keys_c, &keys_s, &keys_e, &consumer_ids];
    let mut named: BTreeSet<&str> = wanted.keys().map(|k| k.1.as_str()).collect();
    for r in reshaped {
        named.extend(r.inventories.keys().map(String::as_str));
    }
    let named: Vec<&str> = named.into_iter().collect();
    let class_params: [&(dyn ToSql + Sync); 1] = [&named];
    // Quota: the projects' guards are locked first, their limits and usage read last (crate::quota).
    let claims = consumers.iter().map(|c| (c.consumer, &*c.project_id, &*c.user_id, &*c.allocations));
    let quota = quota::Check::new(at, claims, Default::default());
    let q = quota.params();
    let [_, _, guard_rows, consumer_rows, draw_rows, provider_rows, other_rows, class_rows, limit_rows, usage_rows] =
        sql::pipeline(
            tx,
            [
                (sql::GENERIC_PLANS, &[]),
                (quota::GUARD_INSERT, &q.guard[..]),
                (quota::GUARD_LOCK, &q.guard[..]),
                (LOCK_CONSUMERS, &consumer_params[..]),
                (super::consume::HOLDS_DRAWS, &consumer_params[..]),
                (LOCK_PROVIDERS, &provider_params[..]),
                (READ_OTHERS, &other_params[..]),
                (KNOWN_CLASSES, &class_params[..]),
                (quota::LIMITS, &q.limits[..]),
                (quota::USAGE, &q.usage[..]),
            ],
        )
        .await?;
    if unless_drawing && !draw_rows.is_empty() {
        return Ok(false);
    }

    let mut current: HashMap<Uuid, (i64, Option<String>)> = HashMap::new();
    let mut previous: HashMap<Key, Vec<(Window, i64)>> = HashMap::new();
    let mut previous_providers: HashMap<Uuid, BTreeSet<Uuid>> = HashMap::new();
    for r in &consumer_rows {
        current.insert(r.get(0), (r.get(1), r.get(7)));
        if let Some(provider) = r.get::<_, Option<Uuid>>(2) {
            let key: Key = (provider, r.get(3));
            previous.entry(key).or_default().push((Window { start: r.get(5), end: r.get(6) }, r.get(4)));
            previous_providers.entry(r.get(0)).or_default().insert(provider);
        }
    }
    for c in consumers {
        let actual = current.get(&c.consumer).map(|x| x.0);
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
            ))
            .into());
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
    for r in reshaped {
        match generations.get(&r.provider) {
            None => {
                return Err(Error::invalid(
                    PROVIDER_NOT_FOUND,
                    format!("Resource provider {} in inventories not found", r.provider),
                )
                .into())
            }
            Some(g) if *g != r.expected_generation => {
                return Err(Error::generation(format!(
                    "resource provider generation conflict for provider {}: actual: {g}, given: {}",
                    r.provider, r.expected_generation
                ))
                .into())
            }
            Some(_) => {}
        }
    }
    if let Some(missing) = provider_ids.iter().find(|p| !generations.contains_key(p)) {
        return Err(Error::invalid(
            PROVIDER_NOT_FOUND,
            format!("Allocation for resource provider '{missing}' that does not exist."),
        )
        .into());
    }
    let known: BTreeSet<String> = class_rows.iter().map(|r| r.get(0)).collect();
    if let Some(unknown) = named.iter().find(|n| !known.contains(**n)) {
        return Err(Error::invalid(RESOURCE_CLASS_NOT_FOUND, format!("No such resource class {unknown}.")).into());
    }
    // 2. Inventories as the allocations see them (in a reshape: the interim
    //    union of the new classes and the dropped ones), and each amount
    //    within its inventory's units.
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
    for c in consumers {
        for a in &c.allocations {
            let Some(inv) = inventories.get(&(a.provider, a.resource_class.clone())) else {
                return Err(Error::capacity(format!(
                    "Inventory for '{}' on resource provider '{}' invalid.",
                    a.resource_class, a.provider
                ))
                .into());
            };
            if inv.check_amount(&a.provider.to_string(), &a.resource_class, a.used).is_err() {
                return Err(Error::capacity(format!(
                    "Unable to create allocation for '{}' on resource provider '{}'. \
                     The requested amount would violate inventory constraints.",
                    a.resource_class, a.provider
                ))
                .into());
            }
        }
    }
    let mut others: HashMap<Key, Vec<(Window, i64)>> = HashMap::new();
    for r in other_rows {
        let w = Window { start: r.get(2), end: r.get(3) };
        others.entry((r.get(0), r.get(1))).or_default().push((w, r.get(4)));
    }
    // 3. Decide: every instant of every new window stays within capacity,
    //    unless the request raises what these consumers held at no instant.
    //    A reshape moves inventory, so nothing it held before excuses it.
    for (key, holds) in &wanted {
        let inv = &inventories[key];
        let others = others.remove(key).unwrap_or_default();
        let before: &[(Window, i64)] =
            if reshaped.is_empty() { previous.get(key).map(Vec::as_slice).unwrap_or(&[]) } else { &[] };
        if !timeline::fits(&others, before, holds, inv.capacity()) {
            return Err(Error::capacity(format!(
                "Unable to create allocation for '{}' on resource provider '{}'. \
                 The requested amount would exceed the capacity.",
                key.1, key.0
            ))
            .into());
        }
    }
    // Quota: within every limit bearing on the consumers' projects and users.
    quota.decide(tx, &guard_rows, limit_rows, usage_rows).await?;
    // 4. A reshape's final inventories may drop a class only when nothing
    //    holds it any more (other consumers now or later, or this request).
    for r in reshaped {
        check_dropped_classes(tx, r, consumers, &consumer_ids).await?;
    }
    // 5. Record: interim inventories, every consumer, final inventories.
    let mut events: Vec<Event> = interim
        .into_iter()
        .map(|(provider, inventories)| Event::InventoriesReplaced { provider, inventories, at })
        .collect();
    let mut bumped: BTreeSet<Uuid> = BTreeSet::new();
    for c in consumers {
        let mut mine: BTreeSet<Uuid> = c.allocations.iter().map(|a| a.provider).collect();
        if c.allocations.is_empty() {
            mine.extend(previous_providers.get(&c.consumer).into_iter().flatten().copied());
        }
        let providers_bumped: Vec<Uuid> = mine.into_iter().filter(|p| bumped.insert(*p)).collect();
        let consumer_type = c.consumer_type.clone().or_else(|| current.get(&c.consumer).and_then(|x| x.1.clone()));
        events.push(Event::AllocationsReplaced {
            consumer: c.consumer,
            project_id: c.project_id.clone(),
            user_id: c.user_id.clone(),
            consumer_type,
            allocations: c.allocations.clone(),
            providers_bumped: Some(providers_bumped),
            at,
        });
    }
    events.extend(reshaped.iter().map(|r| Event::InventoriesReplaced {
        provider: r.provider,
        inventories: r.inventories.clone(),
        at,
    }));
    record(tx, meta, &events).await?;
    Ok(true)
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
