//! Reads from a hot standby: `GET /allocation_candidates` from many clients
//! against a real `berthd serve`, with no standby and with one
//! (`read_database_urls`). The primary and its standby are this scenario's
//! own (the launcher, `pg_basebackup -R`), on this machine: the standby adds
//! a server, not cores, so where berthd and both servers share a few cores
//! the number shows the cost of the routing more than a gain.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use berth_core::EventMeta;
use berth_postgres::{LocalPostgres, THROWAWAY_SETTINGS};
use berth_store::Store;

use crate::daemon::Daemon;
use crate::report::{ms, percentile, Report};

const PROVIDERS: usize = 200;

pub async fn run(report: &mut Report, clients: usize, seconds: u64) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("berth-bench-standby-").tempdir()?;
    let primary = LocalPostgres::start(&dir.path().join("primary"), THROWAWAY_SETTINGS, true)?;
    let (c, conn) = tokio_postgres::connect(&primary.url("postgres"), tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    c.batch_execute("CREATE DATABASE berth").await?;
    let store = Store::connect(&primary.url("berth"), 4)?;
    store.migrate().await?;
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    crate::setup::providers(&store, &meta, PROVIDERS, "read", 64, 262_144).await?;
    primary.base_backup(&dir.path().join("standby")).context("base backup")?;
    let standby = LocalPostgres::start(&dir.path().join("standby"), THROWAWAY_SETTINGS, true)?;
    let standby_url = format!("[\"{}\"]", standby.url("berth"));
    for (label, env) in
        [("no standby", vec![]), ("1 standby", vec![("BERTH_READ_DATABASE_URLS", standby_url.as_str())])]
    {
        let daemon = Daemon::start_with(&primary.url("berth"), clients, &env).await?;
        let (answers, latencies) = drive(&daemon.url, clients, seconds).await?;
        let served = standby_reads(&daemon.url).await?;
        ensure!(env.is_empty() || served > 0.0, "the standby served no read");
        report.line(format!(
            "Allocation candidates ({PROVIDERS} providers, limit 50), {clients} clients, {label}: {:.0} answers/s, \
             p50 {}, p99 {}; {served:.0} reads served by the standby",
            answers as f64 / seconds as f64,
            ms(percentile(&latencies, 50.0)),
            ms(percentile(&latencies, 99.0)),
        ));
    }
    Ok(())
}

/// `clients` clients asking for candidates for `seconds`: answers, and
/// their latencies sorted.
async fn drive(base: &str, clients: usize, seconds: u64) -> Result<(usize, Vec<Duration>)> {
    let url = format!("{base}/placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:256&limit=50");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (url, stop) = (url.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let resp = http
                    .get(&url)
                    .header("x-auth-token", "admin")
                    .header("openstack-api-version", "placement 1.39")
                    .send()
                    .await?;
                ensure!(resp.status().is_success(), "allocation candidates answered {}", resp.status());
                resp.bytes().await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    latencies.sort();
    Ok((latencies.len(), latencies))
}

/// `berth_db_reads_total{served_by="standby"}` from berthd's `/metrics`.
async fn standby_reads(base: &str) -> Result<f64> {
    let text = reqwest::Client::new()
        .get(format!("{base}/metrics"))
        .header("x-auth-token", "admin")
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .find(|l| l.starts_with("berth_db_reads_total{served_by=\"standby\"}"))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
        .unwrap_or(0.0))
}
