//! The capacity read: one pipelined batch that locks what a batch of
//! requests depends on and reads everything their decisions need.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::timeline;
use berth_core::{Inventory, Window};
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use super::request::{ConsumerAllocations, ReshapeInventory};
use crate::commands::now;
use crate::lock::{self, Sorted};
use crate::tx::Pipelined;
use crate::{clock, quota, sql, StoreError};

/// A provider and a resource class.
pub(super) type Key = (Uuid, String);

/// A consumer's holds as a batch stands: what it held when locked, or the
/// new ones once its request is decided.
pub(super) type Held = Vec<(Key, Window, i64)>;

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
pub(super) const READ_OTHERS: &str = "WITH q AS MATERIALIZED (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS q(p, rc, s, e))
     SELECT 0 AS kind, q.p AS provider, q.rc AS class, greatest(lower(a.during), q.s) AS start_at,
            CASE WHEN q.e IS NULL THEN upper(a.during) ELSE least(upper(a.during), q.e) END AS end_at,
            sum(a.used)::int8 AS used, NULL::uuid AS consumer
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

pub(super) const KNOWN_CLASSES: &str = "SELECT name FROM resource_classes WHERE name = ANY($1)";

/// Which consumers hold a draw now (replacing their allocations gives the
/// draw back). Read with the consumers locked, it cannot change.
pub(super) const HOLDS_DRAWS: &str =
    "SELECT DISTINCT consumer_uuid FROM reservation_draws WHERE consumer_uuid = ANY($1)";

/// The providers of `$1` on which a loan runs now (at the transaction's
/// start): a batch's writes there may have to cut it short (commands::loans).
const LENT_ON_NOW: &str = "SELECT DISTINCT provider_uuid FROM loan_allocations
     WHERE provider_uuid = ANY($1) AND during && tstzrange(now(), NULL)";

/// What a batch read, once for all its requests.
pub(super) struct Read {
    /// The instant the batch decides at.
    pub at: DateTime<Utc>,
    /// The batch's consumers.
    pub consumer_ids: Sorted<Uuid>,
    /// Each existing consumer's generation and type.
    pub current: HashMap<Uuid, (i64, Option<String>)>,
    /// What the batch's consumers hold, as the batch stands.
    pub held: HashMap<Uuid, Held>,
    /// Each provider locked, with its generation.
    pub generations: HashMap<Uuid, i64>,
    pub inventories: HashMap<Key, Inventory>,
    /// The resource classes named that exist.
    pub known: BTreeSet<String>,
    /// Holds of consumers outside the batch, by provider and class.
    pub others: HashMap<Key, Vec<(Window, i64)>>,
    /// The limits and usage that bear on the batch, if any limit does.
    pub limited: Option<quota::Limited>,
    /// The batch's consumers that hold a reservation draw.
    pub drawing: BTreeSet<Uuid>,
    /// Whether a loan runs on a provider the batch asks for (its writes
    /// may have to cut it short: commands::loans).
    pub lent_on: bool,
}

/// The new holds of a batch by provider and class, and the window each key
/// is read over (the span of its new holds), as statement parameters.
struct Wanted<'a> {
    keys_p: Vec<Uuid>,
    keys_c: Vec<&'a str>,
    keys_s: Vec<DateTime<Utc>>,
    keys_e: Vec<Option<DateTime<Utc>>>,
}

impl<'a> Wanted<'a> {
    fn new(consumers: &[&'a ConsumerAllocations]) -> Wanted<'a> {
        let mut wanted: BTreeMap<(Uuid, &str), Vec<(Window, i64)>> = BTreeMap::new();
        for c in consumers {
            for a in &c.allocations {
                wanted.entry((a.provider, a.resource_class.as_str())).or_default().push((a.window, a.used));
            }
        }
        let mut w = Wanted { keys_p: Vec::new(), keys_c: Vec::new(), keys_s: Vec::new(), keys_e: Vec::new() };
        for ((p, c), holds) in &wanted {
            let span = timeline::span(holds).expect("holds are not empty");
            w.keys_p.push(*p);
            w.keys_c.push(c);
            w.keys_s.push(span.start);
            w.keys_e.push(span.end);
        }
        w
    }
}

/// Locks and reads, in one round trip, what deciding `consumers` (and a
/// reshape's `reshaped` providers) in turn needs. The statements are sent
/// together (pipelined on the connection, with the transaction's `BEGIN`
/// when they are its first); the server runs them in order, so the reads
/// after the locks see every earlier writer's committed rows:
/// 0. the instant the batch decides at: the transaction's start, when they
///    begin it, read before any lock (`clock::STARTED`); in a transaction
///    begun earlier, the time read just before them (`clock::now`, a round
///    trip of its own);
/// 1. the projects' quota guards, then the consumers, sorted, with what they
///    hold (which cannot change while they are locked), and which of them
///    hold a reservation draw;
/// 2. the providers of the new holds and those the consumers hold now (they
///    get a new generation too), sorted, with their inventories;
/// 3. everyone else's holds over the new windows ([`READ_OTHERS`]);
/// 4. the classes named, the limits and the usage that bear on them.
pub(super) async fn read(
    tx: &Pipelined<'_>,
    consumers: &[&ConsumerAllocations],
    reshaped: &[ReshapeInventory],
) -> Result<Read, StoreError> {
    let claims = consumers.iter().map(|c| (c.consumer, &*c.project_id, &*c.user_id, &*c.allocations));
    let known = if tx.has_begun() { Some(now(tx.client().await?).await?) } else { None };
    let mut quota = match known {
        Some(at) => quota::Check::new(at, claims, Default::default()),
        None => quota::Check::unclocked(claims),
    };
    let consumer_ids: Sorted<Uuid> = consumers.iter().map(|c| c.consumer).collect();
    let wanted = Wanted::new(consumers);
    let providers = wanted.keys_p.iter().copied().chain(reshaped.iter().map(|r| r.provider));
    let provider_ids: Sorted<Uuid> = providers.collect();
    let named =
        wanted.keys_c.iter().copied().chain(reshaped.iter().flat_map(|r| r.inventories.keys().map(String::as_str)));
    let named: Sorted<&str> = named.collect();
    let lock_consumers = lock::consumers_holding(&consumer_ids);
    let lock_providers = lock::providers_with_inventories(&provider_ids, &consumer_ids);
    let consumer_params = [consumer_ids.param()];
    let (w, ids) = (&wanted, consumer_ids.param());
    let other_params: [&(dyn ToSql + Sync); 5] = [&w.keys_p, &w.keys_c, &w.keys_s, &w.keys_e, ids];
    let class_params = [named.param()];
    let lent_params = [&wanted.keys_p as &(dyn ToSql + Sync)];
    // Quota: the projects' guards are locked first, their limits and usage read last (crate::quota).
    let q = quota.params();
    let [_, started, _, guard_rows, consumer_rows, draw_rows, provider_rows, other_rows, class_rows, limit_rows, usage_rows, lent_rows] =
        tx.pipeline([
            (sql::GENERIC_PLANS, &[]),
            (clock::STARTED, &[]),
            (lock::GUARD_INSERT, &q.guard[..]),
            (lock::GUARD_LOCK, &q.guard[..]),
            (lock_consumers.0, &lock_consumers.1[..]),
            (HOLDS_DRAWS, &consumer_params[..]),
            (lock_providers.0, &lock_providers.1[..]),
            (READ_OTHERS, &other_params[..]),
            (KNOWN_CLASSES, &class_params[..]),
            (quota::LIMITS, &q.limits[..]),
            (quota::USAGE, &q.usage[..]),
            (LENT_ON_NOW, &lent_params[..]),
        ])
        .await?;
    let at = known.unwrap_or_else(|| started[0].get("started"));
    quota.clock(at);
    let (current, held) = consumers_from_rows(&consumer_rows);
    let (generations, inventories) = providers_from_rows(&provider_rows);
    let others = others_by_key(&other_rows, &wanted, &held);
    Ok(Read {
        at,
        consumer_ids,
        current,
        held,
        generations,
        inventories,
        known: class_rows.iter().map(|r| r.get("name")).collect(),
        others,
        limited: quota.limits(tx.client().await?, &guard_rows, limit_rows, usage_rows).await?,
        drawing: draw_rows.iter().map(|r| r.get("consumer_uuid")).collect(),
        lent_on: !lent_rows.is_empty(),
    })
}

type Current = HashMap<Uuid, (i64, Option<String>)>;

/// Each consumer's generation and type, and what it holds, from the rows
/// of [`lock::CONSUMERS_HOLDING`].
fn consumers_from_rows(rows: &[Row]) -> (Current, HashMap<Uuid, Held>) {
    let mut current = HashMap::new();
    let mut held: HashMap<Uuid, Held> = HashMap::new();
    for r in rows.iter().map(lock::ConsumerHolding::from_row) {
        current.insert(r.uuid, (r.generation, r.consumer_type));
        if let (Some(provider), Some(class), Some(used), Some(start)) = (r.provider, r.resource_class, r.used, r.start)
        {
            let window = Window { start, end: r.end };
            held.entry(r.uuid).or_default().push(((provider, class), window, used));
        }
    }
    (current, held)
}

/// Each provider's generation and inventories, from the rows of
/// [`lock::PROVIDERS_WITH_INVENTORIES`].
fn providers_from_rows(rows: &[Row]) -> (HashMap<Uuid, i64>, HashMap<Key, Inventory>) {
    let mut generations = HashMap::new();
    let mut inventories = HashMap::new();
    for r in rows.iter().map(lock::ProviderInventory::from_row) {
        generations.insert(r.uuid, r.generation);
        if let Some((class, inv)) = r.inventory {
            inventories.insert((r.uuid, class), inv);
        }
    }
    (generations, inventories)
}

/// Everyone else's holds by provider and class, from the rows of
/// [`READ_OTHERS`] for the keys asked about; `held`: what the batch's own
/// consumers hold (they are not "everyone else").
fn others_by_key(rows: &[Row], wanted: &Wanted<'_>, held: &HashMap<Uuid, Held>) -> HashMap<Key, Vec<(Window, i64)>> {
    let mut others: HashMap<Key, Vec<(Window, i64)>> = HashMap::new();
    // Open-ended holds that began before the window, by key.
    let mut before: HashMap<Key, i64> = HashMap::new();
    for r in rows {
        let key: Key = (r.get("provider"), r.get("class"));
        let used: i64 = r.get("used");
        match r.get::<_, i32>("kind") {
            0 => others.entry(key).or_default().push((Window { start: r.get("start_at"), end: r.get("end_at") }, used)),
            1 => {
                *before.entry(key.clone()).or_default() -= used;
                let consumer: Uuid = r.get("consumer");
                if !held.contains_key(&consumer) {
                    others.entry(key).or_default().push((Window { start: r.get("start_at"), end: None }, used));
                }
            }
            _ => *before.entry(key).or_default() += used,
        }
    }
    for (i, (p, c)) in wanted.keys_p.iter().zip(&wanted.keys_c).enumerate() {
        let key: Key = (*p, c.to_string());
        let (start, end) = (wanted.keys_s[i], wanted.keys_e[i]);
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
