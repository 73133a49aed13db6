//! Invariant 4: replaying the log gives the projections, row for row.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use berth_core::{Inventory, Window};
use berth_store::commands::{GenerationCheck, NewProvider, ProviderUpdate, ReshapeInventory};
use berth_store::testing::TestDatabase;
use chrono::{Duration, Utc};
use common::*;
use rand::{Rng, SeedableRng};
use tokio_postgres::NoTls;
use uuid::Uuid;

const CLASSES: &[&str] = &["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GOLD"];

/// A random workload of every command, successes and refusals mixed.
async fn random_workload(store: &berth_store::Store, seed: u64, steps: usize) -> usize {
    let m = meta();
    store.create_resource_class(&m, "CUSTOM_GOLD", true).await.unwrap();
    store.create_trait(&m, "CUSTOM_FAST").await.unwrap();
    let mut w = Workload {
        store,
        m,
        rng: rand::rngs::StdRng::seed_from_u64(seed),
        providers: Vec::new(),
        consumers: Vec::new(),
        now: Utc::now(),
    };
    let mut ok = 0;
    for step in 0..steps {
        let result = match w.rng.gen_range(0..12) {
            0 | 1 => w.create_provider(step).await,
            2 | 3 => w.replace_inventories().await,
            4 => w.replace_traits().await,
            5 => w.replace_aggregates().await,
            6..=8 => w.claim().await,
            9 => w.release().await,
            10 => w.update_provider(step).await,
            _ => w.delete_or_reshape().await,
        };
        if result.is_ok() {
            ok += 1;
        }
    }
    ok
}

/// The state of a random workload: what it made so far.
struct Workload<'a> {
    store: &'a berth_store::Store,
    m: berth_core::EventMeta,
    rng: rand::rngs::StdRng,
    providers: Vec<Uuid>,
    consumers: Vec<Uuid>,
    now: chrono::DateTime<Utc>,
}

type Outcome = Result<(), berth_core::Error>;

impl Workload<'_> {
    fn pick_provider(&mut self) -> Option<Uuid> {
        self.providers.get(self.rng.gen_range(0..self.providers.len().max(1))).copied()
    }

    fn pick_consumer(&mut self) -> Option<Uuid> {
        self.consumers.get(self.rng.gen_range(0..self.consumers.len().max(1))).copied()
    }

    async fn create_provider(&mut self, step: usize) -> Outcome {
        let parent = if self.rng.gen_bool(0.3) { self.pick_provider() } else { None };
        let r =
            self.store.create_provider(&self.m, NewProvider { uuid: None, name: format!("rp-{step}"), parent }).await;
        r.map(|u| self.providers.push(u))
    }

    async fn replace_inventories(&mut self) -> Outcome {
        let Some(p) = self.pick_provider() else { return Ok(()) };
        let mut inv: BTreeMap<String, Inventory> = BTreeMap::new();
        for c in CLASSES {
            if self.rng.gen_bool(0.7) {
                let i = Inventory {
                    total: self.rng.gen_range(4..64),
                    reserved: self.rng.gen_range(0..2),
                    allocation_ratio: 1.5,
                    ..Default::default()
                };
                inv.insert(c.to_string(), i);
            }
        }
        self.store.replace_inventories(&self.m, p, None, inv).await.map(|_| ())
    }

    async fn replace_traits(&mut self) -> Outcome {
        let Some(p) = self.pick_provider() else { return Ok(()) };
        let traits: BTreeSet<String> = ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]
            .iter()
            .filter(|_| self.rng.gen_bool(0.5))
            .map(|s| s.to_string())
            .collect();
        // HW_CPU_X86_AVX2 may not be seeded: a refusal is a fine outcome.
        self.store.replace_traits(&self.m, p, None, traits).await.map(|_| ())
    }

    async fn replace_aggregates(&mut self) -> Outcome {
        let Some(p) = self.pick_provider() else { return Ok(()) };
        let aggs: BTreeSet<Uuid> = (0..self.rng.gen_range(0..3)).map(|_| Uuid::new_v4()).collect();
        let bump = self.rng.gen_bool(0.5);
        self.store.replace_aggregates(&self.m, p, None, aggs, bump).await.map(|_| ())
    }

    async fn claim(&mut self) -> Outcome {
        let Some(p) = self.pick_provider() else { return Ok(()) };
        let start = self.now + Duration::minutes(self.rng.gen_range(-60..600));
        let window = if self.rng.gen_bool(0.5) {
            Window::from(start)
        } else {
            Window::new(start, Some(start + Duration::minutes(self.rng.gen_range(1..300)))).unwrap()
        };
        let class = CLASSES[self.rng.gen_range(0..CLASSES.len())];
        let existing = self.pick_consumer();
        let (id, check) = match existing {
            Some(c) if self.rng.gen_bool(0.4) => (c, GenerationCheck::Any),
            _ => (Uuid::new_v4(), GenerationCheck::New),
        };
        let allocations = vec![hold(p, class, self.rng.gen_range(1..8), window)];
        let r = self.store.replace_allocations(&self.m, vec![consumer(id, check, allocations)]).await;
        if r.is_ok() && !self.consumers.contains(&id) {
            self.consumers.push(id);
        }
        r
    }

    async fn release(&mut self) -> Outcome {
        let Some(c) = self.pick_consumer() else { return Ok(()) };
        self.store.replace_allocations(&self.m, vec![consumer(c, GenerationCheck::Any, vec![])]).await
    }

    async fn update_provider(&mut self, step: usize) -> Outcome {
        let (Some(p), Some(parent)) = (self.pick_provider(), self.pick_provider()) else { return Ok(()) };
        let name = format!("renamed-{step}");
        let parent = Some(if self.rng.gen_bool(0.5) { Some(parent) } else { None });
        self.store.update_provider(&self.m, p, ProviderUpdate { name, parent, allow_reparent: true }).await
    }

    async fn delete_or_reshape(&mut self) -> Outcome {
        let Some(p) = self.pick_provider() else { return Ok(()) };
        if self.rng.gen_bool(0.5) {
            let r = self.store.delete_provider(&self.m, p).await;
            if r.is_ok() {
                self.providers.retain(|x| *x != p);
            }
            return r;
        }
        let gen = self.store.provider(p).await.unwrap().generation;
        let inv = BTreeMap::from([("VCPU".to_string(), Inventory { total: 32, ..Default::default() })]);
        let reshaped = vec![ReshapeInventory { provider: p, expected_generation: gen, inventories: inv }];
        self.store.reshape(&self.m, reshaped, vec![]).await
    }
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
    let (p, rc): (Uuid, String) = (row.get(0), row.get(1));
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
