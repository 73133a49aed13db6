//! What a real `berthd serve` answers over HTTP as the cloud grows, and
//! what it holds in memory meanwhile: allocation candidates with a limit,
//! a page of hosts, a lease and availability advice should cost about the
//! same on 100 hosts and on 100,000, since each answers a few rows and
//! should read about as many; the whole host list (what python-blazarclient
//! asks for, following no links) is streamed, so berthd's memory should not
//! grow with it.
//!
//! For each host count: a fresh database, that many hosts enrolled through
//! the store (64 VCPU, 256 GiB of MEMORY_MB and 2,000 DISK_GB each, no
//! leases), a `berthd serve` started on it, then, one request at a time,
//! `GET /placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:1024&limit=10`,
//! `GET /v1/os-hosts?limit=10` and the whole `GET /v1/os-hosts`; then as
//! many one-host leases as hosts booked at random 2-hour windows over the
//! next year (a host with any lease to come is no candidate: a claim made
//! now is open-ended), `GET /placement/allocation_candidates?resources=VCPU:1&limit=10`
//! again, `POST /v1/availability` and `POST /v1/leases` for one host at
//! random 2-hour windows. Prints p50 and p99 of each, each p50 against the
//! smallest cloud's, and berthd's resident memory, now and at its peak.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, DurationRound, Utc};
use rand::Rng;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::daemon::Daemon;
use crate::report::{ms, percentile, Report};
use crate::scale::{enrol, ENROLLING};
use crate::scale_leases::{meta, random_window, whole};

/// Requests timed per host count and read (after a warm-up).
const MEASURED: usize = 200;
const WARMUP: usize = 20;
/// Whole host lists timed per host count (each is as long as the cloud).
const WHOLE_LISTS: usize = 5;
/// berthd's database connections.
const POOL: usize = 4;

const CANDIDATES: &str = "/placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:1024&limit=10";
const HOSTS_PAGE: &str = "/v1/os-hosts?limit=10";
const HOSTS_WHOLE: &str = "/v1/os-hosts";
const CANDIDATES_BOOKED: &str = "/placement/allocation_candidates?resources=VCPU:1&limit=10";
/// An administrator and a project member, as berthd's noauth names them.
const ADMIN: &str = "admin";
const MEMBER: &str = "bench:bench";

/// One one-host lease per host, at random 2-hour windows on random hosts
/// within a year of `base`.
async fn book(store: &Store, hosts: &[Uuid], base: DateTime<Utc>) -> Result<()> {
    let mut rng = rand::thread_rng();
    let leases: Vec<_> = (0..hosts.len())
        .map(|_| {
            let (start, end) = random_window(base);
            (hosts[rng.gen_range(0..hosts.len())], start, end)
        })
        .collect();
    crate::setup::book(store, &meta(), &whole(), leases).await
}

/// Latencies of `count` GETs of `path`, sorted; each answer checked to
/// list `expect` items under `key`.
async fn gets(http: &reqwest::Client, url: &str, key: &str, expect: usize, count: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        let resp = http
            .get(url)
            .header("x-auth-token", ADMIN)
            .header("openstack-api-version", "placement 1.39")
            .send()
            .await?;
        ensure!(resp.status().is_success(), "{url} answered {}", resp.status());
        let body: Value = resp.json().await?;
        out.push(t.elapsed());
        let listed = body[key].as_array().map_or(0, Vec::len);
        ensure!(listed == expect, "{url} listed {listed} {key}, not {expect}");
    }
    out.sort();
    Ok(out)
}

/// Blazar's form of a date.
fn blazar(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// Latencies of `count` POSTs of what `body` makes of a random 2-hour
/// window within a year of `base`, sorted; each answered 2xx (advice) or
/// 2xx or 409 for want of room (a lease), and how many were refused so.
async fn posts(
    http: &reqwest::Client,
    url: &str,
    base: DateTime<Utc>,
    count: usize,
    body: impl Fn(DateTime<Utc>, DateTime<Utc>) -> Value,
) -> Result<(Vec<Duration>, usize)> {
    let (mut out, mut refused) = (Vec::with_capacity(count), 0);
    for _ in 0..count {
        let (start, end) = random_window(base);
        let t = Instant::now();
        let resp = http.post(url).header("x-auth-token", MEMBER).json(&body(start, end)).send().await?;
        let status = resp.status();
        let text = resp.text().await?;
        out.push(t.elapsed());
        match status.as_u16() {
            200..=299 => {}
            409 if text.contains("capacity") => refused += 1,
            _ => anyhow::bail!("{url} answered {status}: {text}"),
        }
    }
    out.sort();
    Ok((out, refused))
}

/// A one-host lease over `[start, end)`.
fn lease(start: DateTime<Utc>, end: DateTime<Utc>) -> Value {
    json!({"name": format!("http-{}", Uuid::new_v4()), "start_date": blazar(start), "end_date": blazar(end),
           "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
                             "hypervisor_properties": "", "resource_properties": ""}],
           "events": []})
}

/// Availability advice for one host for the two hours from `start`.
fn advice(start: DateTime<Utc>, _: DateTime<Utc>) -> Value {
    json!({"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}],
           "duration": "2h", "from": blazar(start), "limit": 3})
}

/// p50 of each request on `hosts` hosts.
async fn one_size(report: &mut Report, hosts: usize) -> Result<Vec<(&'static str, Duration)>> {
    let db = TestDatabase::new().await;
    let store = Arc::new(db.store(ENROLLING + 2));
    let t = Instant::now();
    let ids = enrol(&store, hosts).await?;
    db.analyze().await;
    let ready = t.elapsed();
    let daemon = Daemon::start(&db.url, POOL).await?;
    let http = reqwest::Client::new();
    let mut p50s = Vec::new();
    let mut line = |report: &mut Report, what: &'static str, l: &[Duration], more: String| {
        report.line(format!(
            "{what}, {hosts} hosts{more}: p50 {}, p99 {}",
            ms(percentile(l, 50.0)),
            ms(percentile(l, 99.0)),
        ));
        p50s.push((what, percentile(l, 50.0)));
    };
    let ready = format!(" (ready in {:.1} s)", ready.as_secs_f64());
    for (what, path, key) in [
        ("allocation candidates, limit 10", CANDIDATES, "allocation_requests"),
        ("one page of os-hosts, limit 10", HOSTS_PAGE, "hosts"),
    ] {
        let url = format!("{}{path}", daemon.url);
        gets(&http, &url, key, 10, WARMUP).await?;
        line(report, what, &gets(&http, &url, key, 10, MEASURED).await?, ready.clone());
    }
    let url = format!("{}{HOSTS_WHOLE}", daemon.url);
    let l = gets(&http, &url, "hosts", hosts, WHOLE_LISTS).await?;
    line(report, "the whole os-hosts list, no limit (streamed)", &l, format!(" ({WHOLE_LISTS} timed)"));

    let base = (Utc::now() + chrono::Duration::days(1)).duration_trunc(chrono::Duration::hours(1))?;
    book(&store, &ids, base).await?;
    db.analyze().await;
    let booked = format!(", {hosts} leases booked");
    let url = format!("{}{CANDIDATES_BOOKED}", daemon.url);
    gets(&http, &url, "allocation_requests", 10, WARMUP).await?;
    let l = gets(&http, &url, "allocation_requests", 10, MEASURED).await?;
    line(report, "allocation candidates with leases booked, limit 10", &l, booked.clone());
    for (what, path, body) in [
        ("POST /v1/availability, one host for 2 h", "/v1/availability", advice as fn(_, _) -> _),
        ("POST /v1/leases, one host", "/v1/leases", lease),
    ] {
        let url = format!("{}{path}", daemon.url);
        posts(&http, &url, base, WARMUP, body).await?;
        let (l, refused) = posts(&http, &url, base, MEASURED, body).await?;
        line(report, what, &l, format!("{booked}, {refused} refused for capacity"));
    }
    report.memory(&format!("berthd serve on {hosts} hosts"), "after these requests", daemon.memory_mb()?, None);
    Ok(p50s)
}

/// Each host count in `sizes`; p50 against the first size's.
pub async fn run(report: &mut Report, sizes: &[usize]) -> Result<()> {
    let mut first: Option<(usize, Vec<(&'static str, Duration)>)> = None;
    for &n in sizes {
        let p50s = one_size(report, n).await?;
        let Some((n0, p0)) = &first else {
            first = Some((n, p50s));
            continue;
        };
        for ((what, p), (_, p_first)) in p50s.iter().zip(p0) {
            report.line(format!(
                "p50 at {n} hosts against {n0}, {what}: {:.2}x (target at most 2x at 10,000 hosts, 3x at 100,000{})",
                p.as_secs_f64() / p_first.as_secs_f64().max(1e-9),
                if what.starts_with("the whole") { "; a whole list grows with the cloud by nature" } else { "" },
            ));
        }
    }
    Ok(())
}
