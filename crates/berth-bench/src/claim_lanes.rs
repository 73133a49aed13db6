//! Where claims serialise: the store's allocation command with 1, 2 and 4
//! claim lanes, against one project and against 64, while a side connection
//! samples `pg_stat_activity` every few milliseconds. Each sample counts the
//! run's backends by what they do: running, waiting for a lock (and which),
//! waiting on a lightweight lock, or idle inside a transaction (waiting for
//! Berth's next statement while holding its row locks). The share of the
//! backends in a claim transaction that wait on a lock is the share of
//! claim time spent waiting, as the database sees it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use berth_core::EventMeta;
use berth_store::testing::TestDatabase;
use berth_store::Store;
use rand::Rng;
use tokio_postgres::NoTls;
use uuid::Uuid;

use crate::report::{ms, percentile, Report};

const PROVIDERS: usize = 100;
const LANES: &[usize] = &[1, 2, 4];
const PROJECTS: &[usize] = &[1, 64];

/// Backend-samples by state, e.g. "running", "Lock:transactionid on
/// project_open_usage" (a row lock waited for, with the table of the row
/// when the waiter holds its tuple lock), "idle in transaction".
pub(crate) type Samples = BTreeMap<String, u64>;

pub(crate) async fn sample(url: String, name: String, stop: Arc<AtomicBool>) -> Result<Samples> {
    let (c, conn) = tokio_postgres::connect(&url, NoTls).await?;
    tokio::spawn(conn);
    let mut out = Samples::new();
    while !stop.load(Ordering::Relaxed) {
        let rows = c
            .query(
                "SELECT CASE WHEN a.state = 'active'
                             THEN coalesce(a.wait_event_type || ':' || a.wait_event
                                           || coalesce(' on ' || (SELECT string_agg(DISTINCT l.relation::regclass::text, ',')
                                                                  FROM pg_locks l
                                                                  WHERE l.pid = a.pid AND l.locktype = 'tuple'), ''),
                                           'running')
                             ELSE a.state END AS state, count(*) AS n
                 FROM pg_stat_activity a
                 WHERE a.datname = $1 AND a.pid <> pg_backend_pid() AND a.state <> 'idle'
                 GROUP BY 1",
                &[&name],
            )
            .await?;
        for r in rows {
            *out.entry(r.get("state")).or_default() += r.get::<_, i64>("n") as u64;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(out)
}

async fn claim_until(store: &Store, providers: &[Uuid], projects: usize, deadline: Instant) -> Vec<Duration> {
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let mut latencies = Vec::new();
    while Instant::now() < deadline {
        let (p, project) = {
            let mut rng = rand::thread_rng();
            (providers[rng.gen_range(0..providers.len())], rng.gen_range(0..projects))
        };
        let claim = crate::setup::claim(p, format!("bench-p{project}"), "bench".into());
        let t = Instant::now();
        if store.replace_allocations(&meta, vec![claim]).await.is_ok() {
            latencies.push(t.elapsed());
        }
    }
    latencies
}

async fn one(report: &mut Report, clients: usize, seconds: u64, lanes: usize, projects: usize) -> Result<()> {
    let db = TestDatabase::new().await;
    let store = crate::setup::claim_store(&db, clients + 2)?.with_claim_lanes(lanes);
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let providers =
        Arc::new(crate::setup::providers(&store, &meta, PROVIDERS, "bench-", 1_000_000, 1_000_000_000).await?);
    crate::setup::warm(&db, &store, &providers).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(db.url.clone(), db.name.clone(), stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (store, providers) = (store.clone(), providers.clone());
            tokio::spawn(async move { claim_until(&store, &providers, projects, deadline).await })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await??;
    latencies.sort();
    report.rate(
        &format!("claims, {lanes} lane(s), {projects} project(s), {clients} writers"),
        latencies.len() as f64 / elapsed,
    );
    report.line(format!("  p99 {}; {}", ms(percentile(&latencies, 99.0)), shares(&samples)));
    Ok(())
}

/// What `samples` say: the share waiting on a row or object lock, and the
/// five commonest states.
pub(crate) fn shares(samples: &Samples) -> String {
    let total: u64 = samples.values().sum();
    let locked: u64 = samples.iter().filter(|(k, _)| k.starts_with("Lock:")).map(|(_, n)| n).sum();
    let share = |n: u64| if total == 0 { 0.0 } else { n as f64 * 100.0 / total as f64 };
    let mut top: Vec<(&String, &u64)> = samples.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    let top: Vec<String> = top.iter().take(5).map(|(k, n)| format!("{k} {:.0}%", share(**n))).collect();
    format!(
        "backends in a transaction waiting on a row or object lock: {:.1}% of samples; by state: {}",
        share(locked),
        top.join(", ")
    )
}

pub async fn run(report: &mut Report, clients: usize, seconds: u64) -> Result<()> {
    for &projects in PROJECTS {
        for &lanes in LANES {
            one(report, clients, seconds, lanes, projects).await?;
        }
    }
    Ok(())
}
