//! berth-bench: `make bench`. Measures Berth against `pgbench` on the same
//! server in the same run and prints ratios, so the numbers mean something
//! on any machine. Runs under `berthd with-postgres`, which sets
//! `BERTH_PG_URL` (and `BERTH_PG_BIN`). Each scenario gets a fresh database.
//! It measures; it never ships and decides nothing Berth decides: it drives
//! the store, the router and the manager as berthd does.

// Scenarios time things and pick due times on the real clock, which is the
// database server's (same machine); the code measured reads only the database's.
#![allow(clippy::disallowed_methods)]

mod candidates_memory;
mod claim_lanes;
mod counts;
mod daemon;
mod db_cost;
mod manager;
mod pgbench;
mod placement_claims;
mod quota_claims;
mod read_candidates;
mod replay_large;
mod report;
mod scale;
mod scale_lease_ops;
mod scale_leases;
mod scale_placement;
mod setup;
mod simulate;
mod store_claims;
mod store_leases;
mod wrk_claims;
pub mod wrk_report;

use anyhow::{Context, Result};
use clap::Parser;

#[derive(Parser)]
#[command(name = "berth-bench", about = "Berth benchmarks: ratios against pgbench on the same server")]
pub struct Args {
    /// Seconds each timed phase runs.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Concurrent clients for pgbench and for the claim scenarios.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Leases booked before timing lease creation: the small and the large case.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 100_000])]
    pub booked: Vec<usize>,
    /// Events in the log that `replay-large` makes and replays.
    #[arg(long, default_value_t = 1_000_000)]
    pub replay_events: usize,
    /// Only these scenarios (comma-separated): store-claims, replay, replay-large, placement-claims,
    /// wrk-claims, quota-claims, claim-lanes, manager, leases, candidates-memory, read-candidates,
    /// scale, scale-placement, simulate. claim-lanes (1, 2 and 4 lanes against 1 and 64 projects, with
    /// lock waits sampled), scale (lease creation at each of `--scale-hosts`), scale-placement
    /// (allocation candidates and a page of hosts at each of `--scale-hosts`) and simulate (placement
    /// quality, near read against full read) run only when named.
    #[arg(long)]
    pub only: Option<String>,
    /// The manager scenario's `record_wait_ms` (how long its recorder waits
    /// for claims being made; 0: never). The manager's default when absent.
    #[arg(long)]
    pub manager_record_wait_ms: Option<u64>,
    /// Host counts the `scale` scenario creates leases on, each in a fresh database.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1_000, 10_000])]
    pub scale_hosts: Vec<usize>,
    /// Leases the `scale` scenario books at random before it times
    /// creations, one count per host count of `--scale-hosts` (the last
    /// for those after it): `100,1000,10000,100000` with
    /// `1000,10000,100000,1000000` keeps ten to a host as the cloud grows.
    #[arg(long, value_delimiter = ',', default_values_t = [0usize])]
    pub scale_leases: Vec<usize>,
    /// Reservations on the host the `scale` scenario heals.
    #[arg(long, default_value_t = 1_000)]
    pub scale_heal: usize,
}

/// Runs the scenarios `args` names and prints the report.
pub async fn run(args: Args) -> Result<()> {
    let server = std::env::var("BERTH_PG_URL").context("run under `berthd with-postgres` (make bench)")?;
    let wants = |name: &str| args.only.as_deref().is_none_or(|o| o.split(',').any(|s| s == name));
    let mut report = report::Report::default();

    let tps = pgbench::run(&server, args.clients, args.seconds)?;
    report.line(format!(
        "pgbench tpcb-like, {} clients, {} s: {tps:.0} TPS on {} cores",
        args.clients,
        args.seconds,
        report.cores()
    ));
    report.set_baseline(tps);

    if wants("store-claims") || wants("replay") {
        store_claims::run(&mut report, args.clients, args.seconds, wants("replay")).await?;
        in_process_memory(&mut report, "store-claims")?;
    }
    if wants("replay-large") {
        replay_large::run(&mut report, args.replay_events).await?;
    }
    if wants("placement-claims") {
        placement_claims::run(&mut report, args.clients, args.seconds).await?;
        in_process_memory(&mut report, "placement-claims")?;
    }
    if wants("wrk-claims") {
        wrk_claims::run(&mut report, args.clients, args.seconds).await?;
    }
    if wants("quota-claims") {
        quota_claims::run(&mut report, args.clients, args.seconds).await?;
        in_process_memory(&mut report, "quota-claims")?;
    }
    if args.only.as_deref().is_some_and(|o| o.split(',').any(|s| s == "claim-lanes")) {
        claim_lanes::run(&mut report, args.clients, args.seconds).await?;
    }
    if args.only.as_deref().is_some_and(|o| o.split(',').any(|s| s == "scale")) {
        scale::run(&mut report, &args.scale_hosts, &args.scale_leases, args.scale_heal).await?;
        in_process_memory(&mut report, "scale")?;
    }
    if args.only.as_deref().is_some_and(|o| o.split(',').any(|s| s == "scale-placement")) {
        scale_placement::run(&mut report, &args.scale_hosts).await?;
    }
    if args.only.as_deref().is_some_and(|o| o.split(',').any(|s| s == "simulate")) {
        simulate::run(&mut report).await?;
    }
    if wants("manager") {
        manager::run(&mut report, args.seconds.min(10), args.manager_record_wait_ms).await?;
        in_process_memory(&mut report, "manager")?;
    }
    if wants("leases") {
        store_leases::run(&mut report, args.clients, args.seconds, &args.booked).await?;
        in_process_memory(&mut report, "leases")?;
    }
    if wants("read-candidates") {
        read_candidates::run(&mut report, args.clients, args.seconds).await?;
    }
    if wants("candidates-memory") {
        candidates_memory::run(&mut report).await?;
    }
    report.print();
    Ok(())
}

/// The bench process's own memory after a scenario that runs the store,
/// router or manager inside it (berthd's own is measured by the scenarios
/// that start a `berthd serve`).
fn in_process_memory(report: &mut report::Report, scenario: &str) -> Result<()> {
    report.memory("bench process (Berth in-process)", &format!("after {scenario}"), daemon::own_memory_mb()?, None);
    Ok(())
}
