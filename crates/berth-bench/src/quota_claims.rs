//! The cost of quotas on the claim path: the store's allocation command with
//! `clients` concurrent writers claiming for new consumers spread over
//! `PROJECTS` projects, once with no limit anywhere and once with limits for
//! every project (and defaults) that no claim reaches, so that every claim
//! takes its project's guard, reads its limits and its project's usage over
//! time, and decides. Phases alternate (without, with, without, with), each
//! on a fresh database, so that a slow spell of a shared machine falls on
//! both sides. Backends are sampled by state in both, so that the cost
//! splits into waits (the guard rows) and work.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use berth_core::quota::Scope;
use berth_core::EventMeta;
use berth_store::testing::TestDatabase;
use berth_store::Store;
use rand::Rng;
use uuid::Uuid;

use crate::claim_lanes::{sample, shares, Samples};
use crate::report::{ms, percentile, Report};

const PROVIDERS: usize = 100;
const PROJECTS: usize = 64;
const USERS: usize = 4;
const ROUNDS: usize = 2;

struct Phase {
    claims: usize,
    failures: usize,
    elapsed: f64,
    latencies: Vec<Duration>,
    samples: Samples,
}

async fn phase(clients: usize, seconds: u64, limits: bool) -> Result<Phase> {
    let db = TestDatabase::new().await;
    let store = crate::setup::claim_store(&db, clients + 2)?;
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let providers = crate::setup::providers(&store, &meta, PROVIDERS, "bench-", 1_000_000, 1_000_000_000).await?;
    if limits {
        let set = |v: i64| BTreeMap::from([("VCPU".to_string(), v), ("MEMORY_MB".to_string(), v * 1024)]);
        store.set_quota(&meta, Scope::defaults(), set(50_000_000)).await?;
        for p in 0..PROJECTS {
            store.set_quota(&meta, Scope::project(format!("bench-p{p}")), set(10_000_000)).await?;
        }
    }
    crate::setup::warm(&db, &store, &providers).await?;
    let providers = Arc::new(providers);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(db.url.clone(), db.name.clone(), stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (store, providers, meta) = (store.clone(), providers.clone(), meta.clone());
        tasks.push(tokio::spawn(async move { claim_until(&store, &providers, &meta, deadline).await }));
    }
    let started = Instant::now();
    let mut out = Phase { claims: 0, failures: 0, elapsed: 0.0, latencies: Vec::new(), samples: Samples::new() };
    for t in tasks {
        let (l, f) = t.await?;
        out.claims += l.len();
        out.latencies.extend(l);
        out.failures += f;
    }
    out.elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    out.samples = sampler.await??;
    Ok(out)
}

async fn claim_until(store: &Store, providers: &[Uuid], meta: &EventMeta, deadline: Instant) -> (Vec<Duration>, usize) {
    let mut latencies = Vec::new();
    let mut failures = 0usize;
    while Instant::now() < deadline {
        let (p, project, user) = {
            let mut rng = rand::thread_rng();
            (providers[rng.gen_range(0..providers.len())], rng.gen_range(0..PROJECTS), rng.gen_range(0..USERS))
        };
        let claim = crate::setup::claim(p, format!("bench-p{project}"), format!("bench-u{user}"));
        let t = Instant::now();
        match store.replace_allocations(meta, vec![claim]).await {
            Ok(()) => latencies.push(t.elapsed()),
            Err(_) => failures += 1,
        }
    }
    (latencies, failures)
}

pub async fn run(report: &mut Report, clients: usize, seconds: u64) -> Result<()> {
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        without.push(phase(clients, seconds, false).await?);
        with.push(phase(clients, seconds, true).await?);
    }
    let rate =
        |ps: &[Phase]| ps.iter().map(|p| p.claims as f64).sum::<f64>() / ps.iter().map(|p| p.elapsed).sum::<f64>();
    let (r0, r1) = (rate(&without), rate(&with));
    for (name, ps, r) in [("without limits", &without, r0), ("with limits on every project", &with, r1)] {
        let mut lat: Vec<Duration> = ps.iter().flat_map(|p| p.latencies.iter().copied()).collect();
        lat.sort();
        let failures: usize = ps.iter().map(|p| p.failures).sum();
        let rounds: Vec<String> = ps.iter().map(|p| format!("{:.0}", p.claims as f64 / p.elapsed)).collect();
        report.rate(
            &format!(
                "claims {name} ({clients} writers, {PROJECTS} projects, {PROVIDERS} providers, {failures} failed; rounds {})",
                rounds.join(", ")
            ),
            r,
        );
        report.line(format!(
            "claims {name}: latency p50 {}, p99 {}",
            ms(percentile(&lat, 50.0)),
            ms(percentile(&lat, 99.0))
        ));
        let mut samples = Samples::new();
        for (state, n) in ps.iter().flat_map(|p| p.samples.iter()) {
            *samples.entry(state.clone()).or_default() += n;
        }
        report.line(format!("  claims {name}: {}", shares(&samples)));
    }
    report.line(format!(
        "cost of quota checks on claims: {:.1}% ({:.0}/s with, {:.0}/s without, on {} cores; target at most 10%)",
        (1.0 - r1 / r0) * 100.0,
        r1,
        r0,
        report.cores()
    ));
    Ok(())
}
