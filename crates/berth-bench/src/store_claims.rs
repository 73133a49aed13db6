//! Allocation commands straight on the store: 100 providers, `clients`
//! concurrent writers each claiming for a new consumer, for `seconds`. Then
//! the providers are checked for any instant over capacity, and (optionally)
//! the whole log is replayed for events per second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use berth_core::EventMeta;
use berth_store::testing::TestDatabase;
use chrono::Utc;
use rand::Rng;

use crate::report::{ms, percentile, Report};

const PROVIDERS: usize = 100;

pub async fn run(report: &mut Report, clients: usize, seconds: u64, replay: bool) -> Result<()> {
    let db = TestDatabase::new().await;
    let store = crate::setup::claim_store(&db, clients + 2)?;
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let providers = crate::setup::providers(&store, &meta, PROVIDERS, "bench-", 100_000, 100_000_000).await?;
    crate::setup::warm(&db, &store, &providers).await?;
    let providers = Arc::new(providers);
    let before = crate::db_cost::Snapshot::take(&db.url).await?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (store, providers, meta) = (store.clone(), providers.clone(), meta.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0usize;
            while Instant::now() < deadline {
                let p = providers[rand::thread_rng().gen_range(0..providers.len())];
                let claim = crate::setup::claim(p, "bench".into(), "bench".into());
                let t = Instant::now();
                match store.replace_allocations(&meta, vec![claim]).await {
                    Ok(()) => latencies.push(t.elapsed()),
                    Err(_) => failures += 1,
                }
            }
            (latencies, failures)
        }));
    }
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut failures = 0;
    for t in tasks {
        let (l, f) = t.await?;
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = crate::db_cost::Snapshot::take(&db.url).await?;
    let (cost, tables) =
        (after.per_unit_since(&before, latencies.len()), after.tables_per_unit_since(&before, latencies.len()));
    latencies.sort();
    report.rate(
        &format!("store allocation commands ({clients} writers, {PROVIDERS} providers, {failures} failed)"),
        latencies.len() as f64 / elapsed,
    );
    report.line(format!(
        "store allocation command latency: p50 {}, p99 {}",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0))
    ));
    report.line(format!("store allocation command, per claim: {cost}"));
    report.line(format!("  rows per claim by table: {tables}"));
    let mut over = 0;
    for p in providers.iter() {
        let inv = store.inventories(*p).await?;
        let usage = store.provider_usage_at(*p, Utc::now()).await?;
        for (class, used) in usage {
            if used > inv[&class].capacity() {
                over += 1;
            }
        }
    }
    report.line(format!("providers over capacity after the run: {over}"));
    if replay {
        let r = store.replay_verify().await?;
        report.line(format!(
            "replay: {} events in {:.2} s = {:.0} events/s ({})",
            r.events,
            r.elapsed.as_secs_f64(),
            r.events as f64 / r.elapsed.as_secs_f64(),
            if r.is_clean() { "projections match" } else { "PROJECTIONS DIFFER" }
        ));
    }
    Ok(())
}
