//! Replacing consumers' allocation sets (a claim, a move, a resize, a
//! delete, several consumers at once) and reshaping provider trees: each is
//! all-or-nothing, and capacity is checked at every instant of every window.

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
use crate::{sql, Store, StoreError};

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

impl Store {
    /// Replaces the allocation sets of all `consumers` in one transaction.
    pub async fn replace_allocations(
        &self,
        meta: &EventMeta,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<(), Error> {
        check_batch_shape(&consumers)?;
        crate::tx::command!(self, |tx| {
            // Reservation classes draw from their reservation's hold (see consume.rs).
            let consumers = super::consume::draw_from_holds(tx, meta, consumers.clone()).await?;
            write_allocations(tx, meta, &consumers, &[]).await
        })
    }

    /// Replaces the inventories of several providers and the allocations of
    /// several consumers together: the state between the two never exists.
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
        crate::tx::command!(self, |tx| { write_allocations(tx, meta, &consumers, &inventories).await })
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

const LOCK_CONSUMERS: &str =
    "SELECT c.uuid, c.generation, a.provider_uuid, a.resource_class, a.used, lower(a.during), upper(a.during)
     FROM consumers c LEFT JOIN allocations a ON a.consumer_uuid = c.uuid
     WHERE c.uuid = ANY($1) ORDER BY c.uuid FOR UPDATE OF c";

const LOCK_PROVIDERS: &str =
    "SELECT p.uuid, p.generation, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
            i.allocation_ratio
     FROM providers p LEFT JOIN inventories i ON i.provider_uuid = p.uuid
     WHERE p.uuid = ANY($1)
        OR p.uuid IN (SELECT provider_uuid FROM allocations WHERE consumer_uuid = ANY($2))
     ORDER BY p.uuid FOR UPDATE OF p";

const READ_OTHERS: &str = "SELECT a.provider_uuid, a.resource_class, greatest(lower(a.during), q.s) AS s,
            CASE WHEN q.e IS NULL THEN upper(a.during)
             WHEN upper(a.during) IS NULL THEN q.e
             ELSE least(upper(a.during), q.e) END AS e,
            sum(a.used)::int8
     FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS q(p, rc, s, e)
     JOIN allocations a ON a.provider_uuid = q.p AND a.resource_class = q.rc
                   AND a.during && tstzrange(q.s, q.e, '[)')
     WHERE a.consumer_uuid <> ALL($5)
     GROUP BY 1, 2, 3, 4";

async fn write_allocations(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    consumers: &[ConsumerAllocations],
    reshaped: &[ReshapeInventory],
) -> Result<(), StoreError> {
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
    let [consumer_rows, provider_rows, other_rows] = sql::pipeline(
        tx,
        [
            (LOCK_CONSUMERS, &consumer_params[..]),
            (LOCK_PROVIDERS, &provider_params[..]),
            (READ_OTHERS, &other_params[..]),
        ],
    )
    .await?;

    let mut current: HashMap<Uuid, i64> = HashMap::new();
    let mut previous: HashMap<Key, Vec<(Window, i64)>> = HashMap::new();
    for r in &consumer_rows {
        current.insert(r.get(0), r.get(1));
        if let Some(provider) = r.get::<_, Option<Uuid>>(2) {
            let key: Key = (provider, r.get(3));
            previous.entry(key).or_default().push((Window { start: r.get(5), end: r.get(6) }, r.get(4)));
        }
    }
    for c in consumers {
        match (c.generation, current.get(&c.consumer)) {
            (GenerationCheck::New, Some(g)) => {
                return Err(Error::generation(format!(
                    "consumer {} already exists (generation {g}); send its generation to change it",
                    c.consumer
                ))
                .into())
            }
            (GenerationCheck::Exactly(want), None) => {
                return Err(Error::generation(format!(
                    "consumer {} does not exist (expected generation {want})",
                    c.consumer
                ))
                .into())
            }
            (GenerationCheck::Exactly(want), Some(g)) if want != *g => {
                return Err(Error::generation(format!(
                    "consumer {} generation is {g}, not {want}: someone else changed it; fetch and retry",
                    c.consumer
                ))
                .into())
            }
            _ => {}
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
    if let Some(missing) = provider_ids.iter().find(|p| !generations.contains_key(p)) {
        return Err(Error::invalid(codes::INVALID, format!("resource provider {missing} does not exist")).into());
    }
    for r in reshaped {
        let g = generations[&r.provider];
        if g != r.expected_generation {
            return Err(Error::generation(format!(
                "resource provider {} generation is {g}, not {}: someone else updated it",
                r.provider, r.expected_generation
            ))
            .into());
        }
        check_inventory_change_after_reshape(tx, r, consumers).await?;
    }
    // 2. Inventories as they will be, and each amount within its inventory's units.
    for r in reshaped {
        inventories.retain(|(p, _), _| *p != r.provider);
        for (class, inv) in &r.inventories {
            inventories.insert((r.provider, class.clone()), *inv);
        }
    }
    for c in consumers {
        for a in &c.allocations {
            let Some(inv) = inventories.get(&(a.provider, a.resource_class.clone())) else {
                return Err(Error::capacity(format!(
                    "resource provider {} has no inventory of {}",
                    a.provider, a.resource_class
                ))
                .into());
            };
            inv.check_amount(&a.provider.to_string(), &a.resource_class, a.used)?;
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
            let within = timeline::span(holds).expect("holds are not empty");
            let mut all = others;
            all.extend(holds.iter().copied());
            return Err(Error::capacity(format!(
                "not enough {} on resource provider {}: capacity {}, would reach {} (requested {})",
                key.1,
                key.0,
                inv.capacity(),
                timeline::peak(&all, &within),
                holds.iter().map(|h| h.1).sum::<i64>()
            ))
            .into());
        }
    }
    // 4. Record: the reshaped inventories first, then every consumer.
    let mut events: Vec<Event> = reshaped
        .iter()
        .map(|r| Event::InventoriesReplaced { provider: r.provider, inventories: r.inventories.clone(), at })
        .collect();
    events.extend(consumers.iter().map(|c| Event::AllocationsReplaced {
        consumer: c.consumer,
        project_id: c.project_id.clone(),
        user_id: c.user_id.clone(),
        consumer_type: c.consumer_type.clone(),
        allocations: c.allocations.clone(),
        at,
    }));
    record(tx, meta, &events).await?;
    Ok(())
}

/// In a reshape, a dropped class may still have allocations as long as the
/// reshape moves them away: only other consumers' allocations block it.
async fn check_inventory_change_after_reshape(
    tx: &Transaction<'_>,
    r: &ReshapeInventory,
    consumers: &[ConsumerAllocations],
) -> Result<(), StoreError> {
    let moving: Vec<Uuid> = consumers.iter().map(|c| c.consumer).collect();
    let classes: Vec<&str> = r.inventories.keys().map(String::as_str).collect();
    let blocked = tx
        .query_opt(
            "SELECT resource_class FROM allocations
             WHERE provider_uuid = $1 AND NOT (resource_class = ANY($2)) AND consumer_uuid <> ALL($3)
               AND (upper(during) IS NULL OR upper(during) > now()) LIMIT 1",
            &[&r.provider, &classes, &moving],
        )
        .await?;
    if let Some(row) = blocked {
        let class: String = row.get(0);
        return Err(Error::in_use(
            codes::INVENTORY_IN_USE,
            format!("inventory of {class} on resource provider {} has allocations", r.provider),
        )
        .into());
    }
    // The classes themselves must exist.
    let known: i64 =
        tx.query_one("SELECT count(*) FROM resource_classes WHERE name = ANY($1)", &[&classes]).await?.get(0);
    if known as usize != classes.len() {
        return Err(Error::invalid(codes::INVALID, "reshape names an unknown resource class").into());
    }
    Ok(())
}
