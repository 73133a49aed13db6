//! Lease creation straight on the store.
//!
//! Scaling: ten hosts carry N leases already (each host booked one hour in
//! two, back to back from tomorrow on); new leases are created one at a time
//! in the free hours of the first 200 hours, where both bookings look the
//! same. With N = 1,000 and N = 100,000 the latency should barely differ:
//! the capacity check reads only what overlaps the window (and one
//! neighbour on each side), not everything a provider carries.
//!
//! Throughput: `clients` concurrent writers creating one-host leases at
//! random hours over a year on 100 hosts, for `seconds`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use berth_store::commands::{LeaseDates, NewHost, NewLease, NewReservation};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, DurationRound, Utc};
use rand::Rng;
use serde_json::json;
use uuid::Uuid;

use crate::report::{ms, percentile, Report};

const HOSTS: usize = 10;

/// What the store counts while creations run: commands started over after
/// a transient failure, choices taken by another command meanwhile, hosts
/// passed over because another new lease was writing them.
const COUNTED: [&str; 3] =
    ["berth_command_retries", "berth_lease_placement_lost_races", "berth_lease_placement_passed_over"];
const MEASURED: usize = 300;
const WARMUP: usize = 20;

fn meta() -> EventMeta {
    EventMeta { actor: Some("bench".into()), ..Default::default() }
}

fn one_host() -> NewReservation {
    NewReservation {
        resource_type: "physical:host".into(),
        params: json!({"min": 1, "max": 1}),
        demand: Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None },
    }
}

fn hour(base: DateTime<Utc>, h: i64) -> DateTime<Utc> {
    base + chrono::Duration::hours(h)
}

async fn hosts(store: &Store, n: usize) -> Result<Vec<Uuid>> {
    let mut out = Vec::new();
    for i in 0..n {
        let new = NewHost {
            name: format!("bench-host-{i}"),
            resources: Some((16, 65_536, 1_000)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        out.push(store.enrol_host(&meta(), new).await?);
    }
    Ok(out)
}

/// Books `n` leases, two hours apart on each host in turn.
async fn book(store: &Store, hosts: &[Uuid], base: DateTime<Utc>, n: usize) -> Result<()> {
    let whole =
        BTreeMap::from([("VCPU".to_string(), 16), ("MEMORY_MB".to_string(), 65_536), ("DISK_GB".to_string(), 1_000)]);
    let leases = (0..n).map(|i| {
        let k = (i / hosts.len()) as i64;
        (hosts[i % hosts.len()], hour(base, 2 * k), hour(base, 2 * k + 1))
    });
    crate::setup::book(store, &meta(), &whole, leases).await
}

async fn create(
    store: &Store,
    name: String,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<(), berth_core::Error> {
    let new = NewLease {
        name,
        project_id: "bench".into(),
        user_id: "bench".into(),
        dates: LeaseDates::One { start: DateSpec::At(start), end: DateSpec::At(end), before_end: None },
        reservations: vec![one_host()],
    };
    store.create_lease(&meta(), new).await.map(|_| ())
}

/// What berthd's manager says when it starts: leases booked a day ahead
/// then notify no manager, as in a deployment.
async fn manager_said_its_horizon(store: &Store) -> Result<()> {
    store.widen_wake_horizon(berth_manager::ManagerConfig::default().wake_horizon()).await?;
    Ok(())
}

/// Latencies of lease creation on hosts carrying `n` leases.
async fn latencies_with(n: usize) -> Result<(Vec<Duration>, Duration)> {
    let db = TestDatabase::new().await;
    let store = db.store(4).with_drawn_ties(true);
    let hosts = hosts(&store, HOSTS).await?;
    manager_said_its_horizon(&store).await?;
    let base = (Utc::now() + chrono::Duration::days(1)).duration_trunc(chrono::Duration::hours(1))?;
    let t = Instant::now();
    book(&store, &hosts, base, n).await?;
    db.analyze().await;
    let booking = t.elapsed();
    // Free hours 2k+1 in the first 200 hours; each takes HOSTS leases.
    let gap = |j: usize| {
        let k = (j / HOSTS) as i64;
        (hour(base, 2 * k + 1), hour(base, 2 * k + 2))
    };
    for j in 0..WARMUP {
        let (s, e) = gap(j + MEASURED);
        create(&store, format!("warm-{j}"), s, e).await?;
    }
    let mut out = Vec::new();
    for j in 0..MEASURED {
        let (s, e) = gap(j);
        let t = Instant::now();
        create(&store, format!("new-{j}"), s, e).await?;
        out.push(t.elapsed());
    }
    out.sort();
    Ok((out, booking))
}

pub async fn run(report: &mut Report, clients: usize, seconds: u64, booked: &[usize]) -> Result<()> {
    // Throughput first, on a fresh server, before the large booking fills it.
    throughput(report, clients, seconds).await?;
    let (n_small, n_large) = (booked.first().copied().unwrap_or(1_000), booked.last().copied().unwrap_or(100_000));
    let (small, booked_small) = latencies_with(n_small).await?;
    let (large, booked_large) = latencies_with(n_large).await?;
    for (n, l, b) in [(n_small, &small, booked_small), (n_large, &large, booked_large)] {
        report.line(format!(
            "lease creation on {HOSTS} hosts carrying {n} leases (booked in {:.1} s): p50 {}, p99 {}, mean {}",
            b.as_secs_f64(),
            ms(percentile(l, 50.0)),
            ms(percentile(l, 99.0)),
            ms(l.iter().sum::<Duration>() / l.len().max(1) as u32)
        ));
    }
    let ratio = percentile(&large, 50.0).as_secs_f64() / percentile(&small, 50.0).as_secs_f64();
    report.line(format!(
        "lease creation p50, {n_large} vs {n_small} leases booked: ratio {ratio:.2} ({})",
        if ratio <= 1.5 { "within 1.5" } else { "ABOVE 1.5" }
    ));
    Ok(())
}

async fn throughput(report: &mut Report, clients: usize, seconds: u64) -> Result<()> {
    let db = TestDatabase::new().await;
    let store = db.store(clients + 2).with_drawn_ties(true);
    hosts(&store, 100).await?;
    manager_said_its_horizon(&store).await?;
    let base = (Utc::now() + chrono::Duration::days(1)).duration_trunc(chrono::Duration::hours(1))?;
    crate::counts::install();
    let counted = COUNTED.map(crate::counts::get);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(crate::claim_lanes::sample(db.url.clone(), db.name.clone(), stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let store = Arc::new(store);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut full, mut other, mut latencies) = (0usize, 0usize, 0usize, Vec::new());
            let mut i = 0;
            while Instant::now() < deadline {
                let h = rand::thread_rng().gen_range(0..24 * 365);
                let t = Instant::now();
                match create(&store, format!("c{c}-{i}"), hour(base, h), hour(base, h + 1)).await {
                    Ok(()) => {
                        ok += 1;
                        latencies.push(t.elapsed());
                    }
                    Err(e) if e.kind == berth_core::error::ErrorKind::Capacity => full += 1,
                    Err(_) => other += 1,
                }
                i += 1;
            }
            (ok, full, other, latencies)
        }));
    }
    let started = Instant::now();
    let (mut ok, mut full, mut other, mut latencies) = (0, 0, 0, Vec::new());
    for t in tasks {
        let (a, b, c, l) = t.await?;
        ok += a;
        full += b;
        other += c;
        latencies.extend(l);
    }
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await??;
    let counted: Vec<String> = COUNTED
        .iter()
        .zip(counted)
        .map(|(name, before)| match (before, crate::counts::get(name)) {
            (Some(before), Some(now)) => format!("{name} {}", now - before),
            _ => format!("{name} not counted"),
        })
        .collect();
    latencies.sort();
    report.rate_against(
        &format!("lease creations ({clients} clients, 100 hosts; {full} refused for capacity, {other} other errors)"),
        ok as f64 / elapsed,
        0.3,
    );
    report.line(format!(
        "lease creation latency under {clients} clients: p50 {}, p99 {} (target p99 under 25 ms)",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0))
    ));
    report.line(format!("  {}; {}", counted.join(", "), crate::claim_lanes::shares(&samples)));
    let twice = double_booked(&db.url).await?;
    report.line(format!("hosts double-booked after the lease creations: {twice} (target 0)"));
    Ok(())
}

/// Hosts held by two leases at once somewhere: every lease here takes a
/// whole host, so any two of its slots overlapping on one host is one too many.
async fn double_booked(url: &str) -> Result<i64> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT count(DISTINCT a.provider_uuid) AS doubled FROM allocations a JOIN allocations b
               ON b.provider_uuid = a.provider_uuid AND b.resource_class = a.resource_class
              AND b.during && a.during AND b.consumer_uuid > a.consumer_uuid
             WHERE a.resource_class = 'VCPU'",
            &[],
        )
        .await?;
    Ok(row.get("doubled"))
}
