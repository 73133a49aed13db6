//! Placement's reads as the cloud grows: allocation candidates with a
//! limit, and one page of hosts, should cost about the same on 100 hosts
//! and on 10,000, since each answers a few rows and should read about as
//! many.
//!
//! For each host count: a fresh database, that many hosts enrolled through
//! the store (64 VCPU, 256 GiB of MEMORY_MB and 2,000 DISK_GB each, no
//! leases), the real router on a loopback port, then, one request at a
//! time, `GET /placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:1024&limit=10`
//! and `GET /v1/os-hosts?limit=10`; then as many one-host leases as hosts
//! booked at random 2-hour windows over the next year (a host with any
//! lease to come is no candidate: a claim made now is open-ended), and
//! `GET /placement/allocation_candidates?resources=VCPU:1&limit=10` again.
//! Prints p50 and p99 of each, and each p50 against the smallest cloud's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use berth_api::{AppState, Authenticator, Rules};
use berth_core::EventMeta;
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DurationRound, Utc};
use rand::Rng;
use uuid::Uuid;

use crate::report::{ms, percentile, Report};
use crate::scale::{enrol, ENROLLING};

/// Requests timed per host count and read (after a warm-up).
const MEASURED: usize = 200;
const WARMUP: usize = 20;

const CANDIDATES: &str = "/placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:1024&limit=10";
const HOSTS_PAGE: &str = "/v1/os-hosts?limit=10";
const CANDIDATES_BOOKED: &str = "/placement/allocation_candidates?resources=VCPU:1&limit=10";

fn meta() -> EventMeta {
    EventMeta { actor: Some("bench".into()), ..Default::default() }
}

fn whole() -> BTreeMap<String, i64> {
    BTreeMap::from([("VCPU".to_string(), 64), ("MEMORY_MB".to_string(), 262_144), ("DISK_GB".to_string(), 2_000)])
}

/// One one-host lease per host, at random 2-hour windows on random hosts
/// within a year.
async fn book(store: &Store, hosts: &[Uuid]) -> Result<()> {
    let base = (Utc::now() + chrono::Duration::days(1)).duration_trunc(chrono::Duration::hours(1))?;
    let mut rng = rand::thread_rng();
    let leases: Vec<_> = (0..hosts.len())
        .map(|_| {
            let start = base + chrono::Duration::hours(rng.gen_range(0..24 * 365));
            (hosts[rng.gen_range(0..hosts.len())], start, start + chrono::Duration::hours(2))
        })
        .collect();
    crate::setup::book(store, &meta(), &whole(), leases).await
}

/// The real router on a loopback port, served as berthd serves it; its base URL.
async fn serve(store: Store) -> Result<String> {
    let state = AppState {
        app: berth_app::App::bare(store),
        auth: Arc::new(Authenticator::Noauth),
        rules: Arc::new(Rules::defaults()),
        clock: Default::default(),
        build: berth_api::Build::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let config = berth_api::ApiConfig::default();
    tokio::spawn(async move {
        berth_api::serve(listener, berth_api::router(state), &config, None, std::future::pending()).await
    });
    Ok(base)
}

/// Latencies of `count` GETs of `path`, sorted; each answer checked to
/// list `expect` items under `key`.
async fn gets(http: &reqwest::Client, url: &str, key: &str, expect: usize, count: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        let resp = http
            .get(url)
            .header("x-auth-token", "admin")
            .header("openstack-api-version", "placement 1.39")
            .send()
            .await?;
        ensure!(resp.status().is_success(), "{url} answered {}", resp.status());
        let body: serde_json::Value = resp.json().await?;
        out.push(t.elapsed());
        let listed = body[key].as_array().map_or(0, Vec::len);
        ensure!(listed == expect, "{url} listed {listed} {key}, not {expect}");
    }
    out.sort();
    Ok(out)
}

/// p50 of each read on `hosts` hosts.
async fn one_size(report: &mut Report, hosts: usize) -> Result<Vec<Duration>> {
    let db = TestDatabase::new().await;
    let store = Arc::new(db.store(ENROLLING + 2));
    let t = Instant::now();
    let ids = enrol(&store, hosts).await?;
    db.analyze().await;
    let ready = t.elapsed();
    let base = serve((*store).clone()).await?;
    let http = reqwest::Client::new();
    let mut p50s = Vec::new();
    for (what, path, key) in [
        ("allocation candidates, limit 10", CANDIDATES, "allocation_requests"),
        ("one page of os-hosts, limit 10", HOSTS_PAGE, "hosts"),
    ] {
        let url = format!("{base}{path}");
        gets(&http, &url, key, 10, WARMUP).await?;
        let l = gets(&http, &url, key, 10, MEASURED).await?;
        report.line(format!(
            "{what}, {hosts} hosts (ready in {:.1} s): p50 {}, p99 {}",
            ready.as_secs_f64(),
            ms(percentile(&l, 50.0)),
            ms(percentile(&l, 99.0)),
        ));
        p50s.push(percentile(&l, 50.0));
    }
    book(&store, &ids).await?;
    db.analyze().await;
    let url = format!("{base}{CANDIDATES_BOOKED}");
    gets(&http, &url, "allocation_requests", 10, WARMUP).await?;
    let l = gets(&http, &url, "allocation_requests", 10, MEASURED).await?;
    report.line(format!(
        "allocation candidates, limit 10, {hosts} hosts, {hosts} leases booked: p50 {}, p99 {}",
        ms(percentile(&l, 50.0)),
        ms(percentile(&l, 99.0)),
    ));
    p50s.push(percentile(&l, 50.0));
    Ok(p50s)
}

/// Each host count in `sizes`; p50 against the first size's.
pub async fn run(report: &mut Report, sizes: &[usize]) -> Result<()> {
    let mut first: Option<(usize, Vec<Duration>)> = None;
    for &n in sizes {
        let p50s = one_size(report, n).await?;
        match &first {
            None => first = Some((n, p50s)),
            Some((n0, p0)) => {
                let x = |i: usize| p50s[i].as_secs_f64() / p0[i].as_secs_f64();
                report.line(format!(
                    "p50 at {n} hosts against {n0}: allocation candidates {:.2}x, os-hosts page {:.2}x, \
                     allocation candidates with leases booked {:.2}x (target at most 2x)",
                    x(0),
                    x(1),
                    x(2),
                ));
            }
        }
    }
    Ok(())
}
