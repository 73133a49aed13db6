//! Invariant 4: replaying the log gives the projections, row for row.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;
mod staging;

use std::collections::{BTreeMap, BTreeSet};

use berth_core::{Inventory, Window};
use berth_store::commands::{GenerationCheck, NewProvider, ProviderUpdate, ReshapeInventory};
use berth_store::testing::TestDatabase;
use chrono::{DateTime, Duration, Utc};
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::NoTls;
use uuid::Uuid;

const CLASSES: &[&str] = &["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GOLD"];

type Outcome = berth_core::Result<()>;

/// One of `v`, at random (None if it is empty).
fn pick(rng: &mut StdRng, v: &[Uuid]) -> Option<Uuid> {
    v.get(rng.gen_range(0..v.len().max(1))).copied()
}

/// Replaces provider `p`'s inventories with some of the classes, at random.
async fn replace_some_inventories(store: &berth_store::Store, rng: &mut StdRng, p: Uuid) -> Outcome {
    let mut inv: BTreeMap<String, Inventory> = BTreeMap::new();
    for c in CLASSES {
        if rng.gen_bool(0.7) {
            let i = Inventory {
                total: rng.gen_range(4..64),
                reserved: rng.gen_range(0..2),
                allocation_ratio: 1.5,
                ..Default::default()
            };
            inv.insert(c.to_string(), i);
        }
    }
    store.replace_inventories(&meta(), p, None, inv).await.map(|_| ())
}

/// Allocates on provider `p` for a new consumer or one of `consumers`, over
/// a random window, bounded or not.
async fn allocate_on(
    store: &berth_store::Store,
    rng: &mut StdRng,
    p: Uuid,
    now: DateTime<Utc>,
    consumers: &mut Vec<Uuid>,
) -> Outcome {
    let start = now + Duration::minutes(rng.gen_range(-60..600));
    let window = if rng.gen_bool(0.5) {
        Window::from(start)
    } else {
        Window::new(start, Some(start + Duration::minutes(rng.gen_range(1..300)))).unwrap()
    };
    let class = CLASSES[rng.gen_range(0..CLASSES.len())];
    let (id, check) = match pick(rng, consumers) {
        Some(c) if rng.gen_bool(0.4) => (c, GenerationCheck::Any),
        _ => (Uuid::new_v4(), GenerationCheck::New),
    };
    let allocations = vec![hold(p, class, rng.gen_range(1..8), window)];
    let r = store.replace_allocations(&meta(), vec![consumer(id, check, allocations)]).await;
    if r.is_ok() && !consumers.contains(&id) {
        consumers.push(id);
    }
    r
}

/// Deletes provider `p` (taking it off `providers`) or reshapes its
/// inventory, at random.
async fn delete_or_reshape(
    store: &berth_store::Store,
    rng: &mut StdRng,
    p: Uuid,
    providers: &mut Vec<Uuid>,
) -> Outcome {
    if rng.gen_bool(0.5) {
        let r = store.delete_provider(&meta(), p).await;
        if r.is_ok() {
            providers.retain(|x| *x != p);
        }
        return r;
    }
    let gen = store.provider(p).await.unwrap().generation;
    let inv = BTreeMap::from([("VCPU".to_string(), Inventory { total: 32, ..Default::default() })]);
    let reshape = ReshapeInventory { provider: p, expected_generation: gen, inventories: inv };
    store.reshape(&meta(), vec![reshape], vec![]).await
}

/// A random workload of every command, successes and refusals mixed.
async fn random_workload(store: &berth_store::Store, seed: u64, steps: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let m = meta();
    store.create_resource_class(&m, "CUSTOM_GOLD", true).await.unwrap();
    store.create_trait(&m, "CUSTOM_FAST").await.unwrap();
    let mut providers: Vec<Uuid> = Vec::new();
    let mut consumers: Vec<Uuid> = Vec::new();
    let mut ok = 0;
    let now = Utc::now();
    for step in 0..steps {
        let result = match rng.gen_range(0..12) {
            0 | 1 => {
                let parent = if rng.gen_bool(0.3) { pick(&mut rng, &providers) } else { None };
                let r = store.create_provider(&m, NewProvider { uuid: None, name: format!("rp-{step}"), parent }).await;
                r.map(|u| providers.push(u))
            }
            2 | 3 => match pick(&mut rng, &providers) {
                Some(p) => replace_some_inventories(store, &mut rng, p).await,
                None => Ok(()),
            },
            4 => match pick(&mut rng, &providers) {
                Some(p) => {
                    let traits: BTreeSet<String> = ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]
                        .iter()
                        .filter(|_| rng.gen_bool(0.5))
                        .map(|s| s.to_string())
                        .collect();
                    // HW_CPU_X86_AVX2 may not be seeded: a refusal is a fine outcome.
                    store.replace_traits(&m, p, None, traits).await.map(|_| ())
                }
                None => Ok(()),
            },
            5 => match pick(&mut rng, &providers) {
                Some(p) => {
                    let aggs: BTreeSet<Uuid> = (0..rng.gen_range(0..3)).map(|_| Uuid::new_v4()).collect();
                    store.replace_aggregates(&m, p, None, aggs, rng.gen_bool(0.5)).await.map(|_| ())
                }
                None => Ok(()),
            },
            6..=8 => match pick(&mut rng, &providers) {
                Some(p) => allocate_on(store, &mut rng, p, now, &mut consumers).await,
                None => Ok(()),
            },
            9 => match pick(&mut rng, &consumers) {
                Some(c) => store.replace_allocations(&m, vec![consumer(c, GenerationCheck::Any, vec![])]).await,
                None => Ok(()),
            },
            10 => match (pick(&mut rng, &providers), pick(&mut rng, &providers)) {
                (Some(p), Some(parent)) => {
                    let name = format!("renamed-{step}");
                    let parent = Some(if rng.gen_bool(0.5) { Some(parent) } else { None });
                    let update = ProviderUpdate { name, parent, allow_reparent: true };
                    store.update_provider(&m, p, update).await
                }
                _ => Ok(()),
            },
            _ => match pick(&mut rng, &providers) {
                Some(p) => delete_or_reshape(store, &mut rng, p, &mut providers).await,
                None => Ok(()),
            },
        };
        if result.is_ok() {
            ok += 1;
        }
    }
    ok
}

#[tokio::test]
async fn replaying_a_random_workload_gives_the_live_projections() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let ok = random_workload(&store, 7, 400).await;
    assert!(ok > 150, "the workload mostly did something: {ok} of 400 succeeded");
    assert!(open_usage_matches_allocations(&db.url).await > 0, "the workload held something open-ended");
    let report = store.replay_verify().await.unwrap();
    assert!(report.events > 150);
    assert!(report.is_clean(), "{:?}", report.differences);
}

#[tokio::test]
async fn replay_notices_a_projection_that_drifted() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    random_workload(&store, 11, 120).await;
    let clean = store.replay_verify().await.unwrap();
    assert!(clean.is_clean(), "{:?}", clean.differences);
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    c.execute(
        "UPDATE providers SET generation = generation + 1 WHERE uuid = (SELECT uuid FROM providers LIMIT 1)",
        &[],
    )
    .await
    .unwrap();
    let report = store.replay_verify().await.unwrap();
    assert_eq!(report.differences.len(), 1, "{:?}", report.differences);
    assert_eq!(report.differences[0].table, "providers");
    assert_eq!((report.differences[0].only_live, report.differences[0].only_replayed), (1, 1));
}

/// What no constraint enforces on the claim path is checked by replay: an
/// allocation whose consumer is gone, and open-ended usage that no longer
/// sums the open-ended allocations.
#[tokio::test]
async fn replay_checks_what_no_constraint_enforces() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    random_workload(&store, 13, 120).await;
    assert!(store.replay_verify().await.unwrap().is_clean());
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = c
        .query_one("SELECT provider_uuid, resource_class FROM provider_open_usage WHERE used > 0 LIMIT 1", &[])
        .await
        .unwrap();
    let (p, rc): (Uuid, String) = (row.get("provider_uuid"), row.get("resource_class"));
    let bump = "UPDATE provider_open_usage SET used = used + $3 WHERE provider_uuid = $1 AND resource_class = $2";
    c.execute(bump, &[&p, &rc, &1i64]).await.unwrap();
    let report = store.replay_verify().await.unwrap();
    let tables: Vec<&str> = report.differences.iter().map(|d| d.table.as_str()).collect();
    assert_eq!(
        tables,
        ["provider_open_usage", "provider_open_usage differing from the sum of open-ended allocations"],
        "{:?}",
        report.differences
    );
    c.execute(bump, &[&p, &rc, &-1i64]).await.unwrap();
    c.batch_execute("DELETE FROM consumers WHERE uuid = (SELECT consumer_uuid FROM allocations LIMIT 1)")
        .await
        .unwrap();
    let report = store.replay_verify().await.unwrap();
    let tables: Vec<&str> = report.differences.iter().map(|d| d.table.as_str()).collect();
    assert_eq!(
        tables,
        ["consumers", "allocations naming a missing provider, consumer or class"],
        "{:?}",
        report.differences
    );
}

/// A project's open-ended sum is kept in stripes (one per claim lane): a
/// stripe row that drifted is found, as its total no longer sums the
/// allocations; used moved between stripes of one sum is no drift.
#[tokio::test]
async fn replay_notices_a_drifted_stripe_of_a_project_sum() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    random_workload(&store, 17, 120).await;
    let p = provider(&store, "stripe-drift", &[("VCPU", 8)]).await;
    let open = consumer(Uuid::new_v4(), GenerationCheck::New, vec![hold(p, "VCPU", 2, Window::from(Utc::now()))]);
    store.replace_allocations(&meta(), vec![open]).await.unwrap();
    assert!(store.replay_verify().await.unwrap().is_clean());
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = c
        .query_one(
            "SELECT project_id, user_id, resource_class FROM project_open_usage
             GROUP BY 1, 2, 3 HAVING sum(used) > 0 LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    let (p, u, rc): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    let add = "INSERT INTO project_open_usage (project_id, user_id, resource_class, stripe, used)
               VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (project_id, resource_class, user_id, stripe)
               DO UPDATE SET used = project_open_usage.used + excluded.used";
    c.execute(add, &[&p, &u, &rc, &90i16, &3i64]).await.unwrap();
    c.execute(add, &[&p, &u, &rc, &91i16, &-3i64]).await.unwrap();
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
    c.execute(add, &[&p, &u, &rc, &91i16, &1i64]).await.unwrap();
    let report = store.replay_verify().await.unwrap();
    let tables: Vec<&str> = report.differences.iter().map(|d| d.table.as_str()).collect();
    assert_eq!(
        tables,
        ["project_open_usage", "project_open_usage differing from the sum of open-ended allocations"],
        "{:?}",
        report.differences
    );
}

/// Commands of many consumers each: mostly new claims, some replacing or
/// deleting a consumer an earlier command made (a later event overwrites
/// an earlier one; a delete follows a create), so the log has long runs
/// of allocation replacements for replay to write together.
async fn batched_claims(store: &berth_store::Store, commands: usize, per_command: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(17);
    let providers =
        [provider(store, "big-0", &[("VCPU", 100_000)]).await, provider(store, "big-1", &[("VCPU", 100_000)]).await];
    let mut alive: Vec<Uuid> = Vec::new();
    let mut events = 0;
    for _ in 0..commands {
        let mut batch: BTreeMap<Uuid, _> = BTreeMap::new();
        while batch.len() < per_command {
            let p = providers[rng.gen_range(0..2)];
            let start = Utc::now() - Duration::minutes(rng.gen_range(0..60));
            let window = if rng.gen_bool(0.5) {
                Window::from(start)
            } else {
                Window::new(start, Some(start + Duration::hours(1))).unwrap()
            };
            let held = vec![hold(p, "VCPU", rng.gen_range(1..4), window)];
            let (id, check, held) = match rng.gen_range(0..10) {
                0..=6 => (Uuid::new_v4(), GenerationCheck::New, held),
                7 | 8 => match pick(&mut rng, &alive) {
                    Some(c) => (c, GenerationCheck::Any, held),
                    None => continue,
                },
                _ => match pick(&mut rng, &alive) {
                    Some(c) => (c, GenerationCheck::Any, vec![]),
                    None => continue,
                },
            };
            batch.entry(id).or_insert_with(|| consumer(id, check, held));
        }
        let batch: Vec<_> = batch.into_values().collect();
        for c in &batch {
            alive.retain(|a| *a != c.consumer);
            if !c.allocations.is_empty() {
                alive.push(c.consumer);
            }
        }
        events += batch.len();
        store.replace_allocations(&meta(), batch).await.unwrap();
    }
    events
}

/// The tables that differ, with their rows only live and only replayed.
fn differing(report: &berth_store::replay::ReplayReport) -> Vec<(&str, i64, i64)> {
    report.differences.iter().map(|d| (d.table.as_str(), d.only_live, d.only_replayed)).collect()
}

/// Replay in runs and pages still finds a row altered, added or deleted
/// behind the log's back, and names its table.
#[tokio::test]
async fn replay_in_runs_finds_a_row_altered_added_or_deleted_behind_the_logs_back() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let claims = batched_claims(&store, 6, 500).await;
    let clean = store.replay_verify().await.unwrap();
    assert!(clean.events as usize > claims, "{} events replayed", clean.events);
    assert!(clean.is_clean(), "{:?}", clean.differences);
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);

    let one = "(SELECT uuid FROM consumers ORDER BY uuid LIMIT 1)";
    c.batch_execute(&format!("UPDATE consumers SET generation = generation + 1 WHERE uuid = {one}")).await.unwrap();
    assert_eq!(differing(&store.replay_verify().await.unwrap()), [("consumers", 1, 1)]);
    c.batch_execute(&format!("UPDATE consumers SET generation = generation - 1 WHERE uuid = {one}")).await.unwrap();

    c.batch_execute(
        "INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at)
         SELECT gen_random_uuid(), project_id, user_id, consumer_type, 1, created_at, updated_at FROM consumers LIMIT 1",
    )
    .await
    .unwrap();
    assert_eq!(differing(&store.replay_verify().await.unwrap()), [("consumers", 1, 0)]);
    c.batch_execute(
        "DELETE FROM consumers c WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_uuid = c.uuid)",
    )
    .await
    .unwrap();
    assert!(store.replay_verify().await.unwrap().is_clean());

    // A bounded allocation: no open-ended sum counts it.
    c.batch_execute(
        "DELETE FROM allocations WHERE ctid = (SELECT ctid FROM allocations WHERE NOT upper_inf(during) LIMIT 1)",
    )
    .await
    .unwrap();
    assert_eq!(differing(&store.replay_verify().await.unwrap()), [("allocations", 0, 1)]);
}
