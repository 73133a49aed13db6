//! `replay --verify` of a large log (a million events by default), by the
//! real `berthd replay --verify` process: its events per second, its whole
//! run's time and its peak resident memory, each beside the target.
//!
//! The log is made by the store's own allocation commands, a thousand
//! consumers per command, so the live projections are what commands make:
//! mostly new consumers' claims, some claims replaced (a later event
//! overwrites an earlier one) and some deleted (a delete after a create).

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use berth_core::event::Allocation;
use berth_core::{EventMeta, Window};
use berth_store::commands::{ConsumerAllocations, GenerationCheck};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::Utc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use crate::report::Report;

const PROVIDERS: usize = 100;
/// Consumers per command: one event each.
const BATCH: usize = 1_000;
/// Commands run at once, each on its own consumers.
const WRITERS: u64 = 2;
/// At least this on 2 cores; 150,000 on 16.
const TARGET_EVENTS_PER_SECOND: f64 = 100_000.0;
const TARGET_SECONDS: f64 = 60.0;

pub async fn run(report: &mut Report, events: usize) -> Result<()> {
    let db = TestDatabase::new().await;
    let store = db.store(WRITERS as usize + 1);
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let providers = crate::setup::providers(&store, &meta, PROVIDERS, "large-", 1_000_000, 1_000_000_000).await?;
    let built = Instant::now();
    let mut writers = Vec::new();
    for seed in 0..WRITERS {
        let (store, meta, providers) = (store.clone(), meta.clone(), providers.clone());
        let commands = events.div_ceil(BATCH * WRITERS as usize);
        writers.push(tokio::spawn(async move { write(&store, &meta, &providers, seed, commands).await }));
    }
    for w in writers {
        w.await??;
    }
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let logged: i64 = c.query_one("SELECT count(*) AS n FROM log_events", &[]).await?.get("n");
    report.line(format!("replay-large: {logged} events logged in {:.0} s", built.elapsed().as_secs_f64()));

    let (out, elapsed, peak_mb) = replay_verify(&db.url).await?;
    let line = out.lines().find(|l| l.starts_with("replayed ")).with_context(|| format!("berthd said: {out}"))?;
    // "replayed N events in S s (R events/s)"
    let words: Vec<&str> = line.split_whitespace().collect();
    let replayed: f64 = words[1].parse()?;
    let seconds: f64 = words[4].trim_end_matches('s').parse()?;
    report.line(format!(
        "replay-large: berthd replay --verify rebuilt {replayed:.0} events in {seconds:.2} s = {:.0} events/s \
         (target at least {TARGET_EVENTS_PER_SECOND:.0}/s on 2 cores, 150000/s on 16); the whole run {:.1} s (target under {TARGET_SECONDS:.0} s), \
         peak resident memory {peak_mb:.0} MB; {}",
        replayed / seconds,
        elapsed.as_secs_f64(),
        if out.contains("projections match the log") { "projections match" } else { "PROJECTIONS DIFFER" }
    ));
    Ok(())
}

/// `commands` allocation commands of [`BATCH`] consumers each: nine in ten
/// new, the rest replacing or deleting a consumer this writer made.
async fn write(store: &Store, meta: &EventMeta, providers: &[Uuid], seed: u64, commands: usize) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut alive: Vec<Uuid> = Vec::new();
    for _ in 0..commands {
        let now = Window::from(Utc::now());
        let mut named = HashSet::new();
        let mut batch = Vec::with_capacity(BATCH);
        while batch.len() < BATCH {
            let provider = providers[rng.gen_range(0..providers.len())];
            let held = vec![
                Allocation { provider, resource_class: "VCPU".into(), used: 1, window: now },
                Allocation { provider, resource_class: "MEMORY_MB".into(), used: 256, window: now },
            ];
            let roll = rng.gen_range(0..100);
            let (consumer, generation, allocations) = if roll < 90 || alive.len() < BATCH * 2 {
                let consumer = Uuid::new_v4();
                alive.push(consumer);
                (consumer, GenerationCheck::New, held)
            } else if roll < 96 {
                (alive[rng.gen_range(0..alive.len())], GenerationCheck::Any, held)
            } else {
                (alive.swap_remove(rng.gen_range(0..alive.len())), GenerationCheck::Any, Vec::new())
            };
            // A consumer picked twice for one command is named once.
            if named.insert(consumer) {
                let (project_id, user_id) = ("bench".to_string(), "bench".to_string());
                batch.push(ConsumerAllocations {
                    consumer,
                    project_id,
                    user_id,
                    consumer_type: None,
                    generation,
                    allocations,
                });
            }
        }
        store.replace_allocations(meta, batch).await?;
    }
    Ok(())
}

/// Runs `berthd replay --verify` on `url`: its output, how long it took and
/// its peak resident memory in MB (the kernel's high-water mark, sampled
/// until it exits).
async fn replay_verify(url: &str) -> Result<(String, Duration, f64)> {
    let bin = std::env::current_exe()?.with_file_name("berthd");
    if !bin.exists() {
        bail!("{} is missing: build it (cargo build --release -p berthd)", bin.display());
    }
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["replay", "--verify"])
        .env("BERTH_DATABASE_URL", url)
        // BERTH_BENCH_REPLAY_LOG=info shows where the replay's time goes.
        .env("BERTH_LOG", std::env::var("BERTH_BENCH_REPLAY_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start berthd replay")?;
    let mut peak_mb = 0.0f64;
    let status = loop {
        if let Ok((_, peak)) = crate::daemon::memory_mb(child.id()) {
            peak_mb = peak_mb.max(peak);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let elapsed = started.elapsed();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().context("stdout")?, &mut out)?;
    if !status.success() && !out.contains("DIFFERENT") {
        bail!("berthd replay --verify failed ({status}): {out}");
    }
    Ok((out, elapsed, peak_mb))
}
