//! The manager: lag from an event's due time to its hook starting, with many
//! events due in the same second and with a steady stream; and events per
//! second through the whole path (claim, hook through the noop driver,
//! outcome and lease status recorded).
//!
//! The manager runs in process on the store. Its plugin is a resource type
//! held entirely outside (validate: nothing) whose hooks call the noop
//! driver, so what is measured is Berth's own work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use async_trait::async_trait;
use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use berth_manager::{Manager, ManagerConfig};
use berth_plugins::driver::{Driver, NoopDriver};
use berth_plugins::{Hook, HookError, HookOutcome, Registry, ResourcePlugin, ResourceRequest};
use berth_store::commands::{LeaseDates, NewLease, NewReservation};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::report::{ms, percentile, Report};

const TYPE: &str = "bench:noop";

/// Records when each lease's start hook began.
struct BenchPlugin {
    driver: NoopDriver,
    due: Mutex<HashMap<Uuid, DateTime<Utc>>>,
    started: Mutex<Vec<(Uuid, DateTime<Utc>)>>,
}

#[async_trait]
impl ResourcePlugin for BenchPlugin {
    fn resource_type(&self) -> &str {
        TYPE
    }
    async fn validate(&self, _: &serde_json::Value) -> Result<ResourceRequest, berth_core::Error> {
        Ok(ResourceRequest::Nothing)
    }
    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let now = Utc::now();
        if let Some(lease) = hook.lease["id"].as_str().and_then(|s| s.parse::<Uuid>().ok()) {
            self.started.lock().unwrap().push((lease, now));
        }
        let detail = self.driver.call("on_start", &serde_json::Value::Null, &hook.idempotency_key).await?;
        Ok(HookOutcome { detail, effects: Vec::new() })
    }
    async fn before_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let detail = self.driver.call("before_end", &serde_json::Value::Null, &hook.idempotency_key).await?;
        Ok(HookOutcome { detail, effects: Vec::new() })
    }
    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let detail = self.driver.call("on_end", &serde_json::Value::Null, &hook.idempotency_key).await?;
        Ok(HookOutcome { detail, effects: Vec::new() })
    }
}

fn config(record_wait_ms: Option<u64>) -> ManagerConfig {
    let default = ManagerConfig::default();
    ManagerConfig {
        id: Some("bench".into()),
        poll_interval_ms: 1_000,
        record_wait_ms: record_wait_ms.unwrap_or(default.record_wait_ms),
        ..default
    }
}

/// Creates leases starting at `starts` (and ending a day after it, or after
/// now), from `clients` writers at once; returns lease id -> start.
async fn book(store: &Store, starts: &[DateSpec], clients: usize) -> Result<HashMap<Uuid, DateTime<Utc>>> {
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let starts = Arc::new(starts.to_vec());
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (store, meta, starts, next) = (store.clone(), meta.clone(), starts.clone(), next.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(start) = starts.get(i).copied() else { break };
                    let new = NewLease {
                        name: format!("bench-{i}"),
                        project_id: "bench".into(),
                        user_id: "bench".into(),
                        dates: LeaseDates::One {
                            start,
                            end: DateSpec::At(start.resolve(Utc::now()) + chrono::Duration::days(1)),
                            before_end: None,
                        },
                        reservations: vec![NewReservation {
                            resource_type: TYPE.into(),
                            params: serde_json::json!({}),
                            demand: Demand::Nothing,
                        }],
                    };
                    let record = &store.create_lease(&meta, new).await?[0].record;
                    out.push((record.id, record.start));
                }
                Ok::<_, berth_core::Error>(out)
            })
        })
        .collect();
    let mut all = HashMap::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

async fn done(store: &Store) -> Result<i64> {
    Ok(store.lease_event_counts().await?.get("DONE").copied().unwrap_or(0))
}

/// Waits until the `n` events due by `until` are DONE; the instant the
/// last one was seen. It looks every 5 ms with a count over the claim's
/// partial indexes of events still to fire (a count of every event by
/// status, on a 2-core machine, took a third of a core from the manager it
/// measured), then checks once, off the clock, that all of them are DONE.
/// (The bench's events are never retried nor fired early, so an event
/// waiting for its time is due at its `time`.)
async fn wait_done(s: &Setup, n: i64, until: DateTime<Utc>, limit: Duration) -> Result<Instant> {
    let (c, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let deadline = Instant::now() + limit;
    loop {
        let left: i64 = c
            .query_one(
                "SELECT (SELECT count(*) FROM lease_events
                         WHERE status = 'UNDONE' AND coalesce(retry_at, time) <= $1)
                      + (SELECT count(*) FROM lease_events WHERE status = 'IN_PROGRESS' AND time <= $1) AS remaining",
                &[&until],
            )
            .await?
            .get("remaining");
        if left == 0 {
            let seen = Instant::now();
            let done = done(&s.store).await?;
            if done < n {
                bail!("only {done} of {n} lease events done; the others failed");
            }
            return Ok(seen);
        }
        if Instant::now() > deadline {
            bail!("only {} of {n} lease events done after {limit:?}", done(&s.store).await?);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

struct Setup {
    db: TestDatabase,
    store: Store,
    plugin: Arc<BenchPlugin>,
    registry: Arc<Registry>,
}

async fn setup() -> Setup {
    let db = TestDatabase::new().await;
    let store = db.store(24);
    let plugin = Arc::new(BenchPlugin { driver: NoopDriver::new(), due: Mutex::default(), started: Mutex::default() });
    let mut registry = Registry::new();
    registry.register(plugin.clone());
    Setup { db, store, plugin, registry: Arc::new(registry) }
}

fn start(s: &Setup, record_wait_ms: Option<u64>) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let m = Manager::new(s.store.clone(), s.registry.clone(), config(record_wait_ms));
    (
        tx,
        tokio::spawn(m.run(async move {
            let _ = rx.await;
        })),
    )
}

/// The lag from due time to hook start, and its two parts: due time to the
/// claim statement's start (its `LeaseEventClaimed` at, on the database's
/// clock: the loop waking and asking), and from there to the hook start
/// (the claim statement, the read of the leases for hooks, the task's
/// start). The database runs on this machine: one clock.
async fn lags_line(report: &mut Report, what: &str, s: &Setup, target: &str) -> Result<()> {
    let (c, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let rows = c
        .query(
            "SELECT (data->>'lease')::uuid AS lease, min((data->>'at')::timestamptz) AS claimed_at FROM log_events
             WHERE type = 'LeaseEventClaimed' AND data->>'event_type' = 'start_lease' GROUP BY 1",
            &[],
        )
        .await?;
    let claimed: HashMap<Uuid, DateTime<Utc>> = rows.iter().map(|r| (r.get("lease"), r.get("claimed_at"))).collect();
    let due = s.plugin.due.lock().unwrap().clone();
    let span = |a: DateTime<Utc>, b: DateTime<Utc>| (b - a).to_std().unwrap_or(Duration::ZERO);
    let (mut lags, mut waits, mut claims) = (Vec::new(), Vec::new(), Vec::new());
    for (lease, started) in s.plugin.started.lock().unwrap().iter() {
        let Some(due) = due.get(lease).copied() else { continue };
        lags.push(span(due, *started));
        if let Some(at) = claimed.get(lease).copied() {
            waits.push(span(due, at));
            claims.push(span(at, *started));
        }
    }
    let p = |v: &mut Vec<Duration>| {
        v.sort();
        (ms(percentile(v, 50.0)), ms(percentile(v, 99.0)))
    };
    let max = lags.iter().max().copied().unwrap_or_default();
    let ((l50, l99), (w50, w99), (c50, c99)) = (p(&mut lags), p(&mut waits), p(&mut claims));
    report.line(format!(
        "manager lag due -> hook start, {what}: p50 {l50}, p99 {l99}, max {} ({} events; target p99 {target}); \
         due -> claim statement p50 {w50}, p99 {w99}; claim statement -> hook start p50 {c50}, p99 {c99}",
        ms(max),
        lags.len()
    ));
    Ok(())
}

pub async fn run(report: &mut Report, seconds: u64, record_wait_ms: Option<u64>) -> Result<()> {
    // 1,000 start events due in the same second (the same instant).
    {
        let s = setup().await;
        let (stop, running) = start(&s, record_wait_ms);
        let at = Utc::now() + chrono::Duration::seconds(30);
        let due = book(&s.store, &vec![DateSpec::At(at); 1000], 16).await?;
        if Utc::now() >= at {
            bail!("booking 1,000 leases took more than 30 s");
        }
        *s.plugin.due.lock().unwrap() = due;
        wait_done(&s, 1000, at, Duration::from_secs(120)).await?;
        lags_line(report, "1,000 due in the same second", &s, "under 50 ms").await?;
        let _ = stop.send(());
        running.await?;
    }
    // A steady 200 events per second.
    {
        let s = setup().await;
        let (stop, running) = start(&s, record_wait_ms);
        let n = 200 * seconds as usize;
        let first = Utc::now() + chrono::Duration::seconds(30);
        let starts: Vec<_> = (0..n).map(|i| first + chrono::Duration::microseconds(5_000 * i as i64)).collect();
        let due = book(&s.store, &starts.iter().copied().map(DateSpec::At).collect::<Vec<_>>(), 16).await?;
        if Utc::now() >= first {
            bail!("booking {n} leases took more than 30 s");
        }
        *s.plugin.due.lock().unwrap() = due;
        wait_done(&s, n as i64, starts[n - 1], Duration::from_secs(seconds + 120)).await?;
        lags_line(report, "steady 200/s", &s, "under 5 ms").await?;
        let _ = stop.send(());
        running.await?;
    }
    // Throughput: many events already due when the manager starts.
    {
        let s = setup().await;
        let n = 10_000usize;
        // Each lease starts when it is created (the manager is not running
        // yet), so however long booking takes every start is due once it
        // is over: a start booked ahead of time could pass during a slow
        // booking and be refused as in the past.
        book(&s.store, &vec![DateSpec::Now; n], 16).await?;
        let wal = Wal::open(&s).await?;
        let from = wal.lsn().await?;
        let at = Utc::now();
        let t = Instant::now();
        let (stop, running) = start(&s, record_wait_ms);
        let end = wait_done(&s, n as i64, at, Duration::from_secs(600)).await?;
        let to = wal.lsn().await?;
        let elapsed = end.duration_since(t).as_secs_f64();
        report.line(format!(
            "manager throughput, noop driver: {n} due events in {elapsed:.2} s = {:.0} events/s ({} driver calls; \
             on {} cores; target at least 5,000 on 2 cores, 20,000 on 16)",
            n as f64 / elapsed,
            s.plugin.driver.calls(),
            report.cores()
        ));
        report.line(wal.per_event(&from, &to, n).await);
        let _ = stop.send(());
        running.await?;
        let r = s.store.replay_verify().await?;
        report.line(format!(
            "after the manager runs: replay {}",
            if r.is_clean() { "matches the projections" } else { "DIFFERS FROM THE PROJECTIONS" }
        ));
    }
    Ok(())
}

/// What the database wrote while the manager fired the throughput
/// scenario's events, from its write-ahead log (`pg_walinspect`): the
/// records per event by kind (rows inserted, updated in place (HOT) or
/// not, locked; index entries) and the bytes. The whole server's, but
/// nothing else writes meanwhile (the bench's own look only reads).
struct Wal {
    c: tokio_postgres::Client,
    /// Why there is no breakdown (the extension is not installed).
    missing: Option<String>,
}

impl Wal {
    async fn open(s: &Setup) -> Result<Wal> {
        let (c, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        let missing = c
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            .await
            .err()
            .map(|e| e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string()));
        Ok(Wal { c, missing })
    }

    /// Where the log ends now.
    async fn lsn(&self) -> Result<String> {
        Ok(self.c.query_one("SELECT pg_current_wal_insert_lsn()::text AS lsn", &[]).await?.get("lsn"))
    }

    /// The line: records per event between `from` and `to`.
    async fn per_event(&self, from: &str, to: &str, n: usize) -> String {
        if let Some(why) = &self.missing {
            return format!("manager throughput, WAL per event: not measured ({why})");
        }
        match self.breakdown(from, to, n).await {
            Ok(line) => line,
            Err(e) => format!("manager throughput, WAL per event: not measured ({e})"),
        }
    }

    async fn breakdown(&self, from: &str, to: &str, n: usize) -> Result<String> {
        // The inspector reads only what is flushed (the wal writer flushes
        // within its delay, 200 ms by default).
        for _ in 0..100 {
            let flushed: bool = self
                .c
                .query_one("SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn AS flushed", &[&to])
                .await?
                .get("flushed");
            if flushed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rows = self
            .c
            .query(
                "SELECT \"resource_manager/record_type\" AS kind, count, combined_size
                 FROM pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn, true) WHERE count > 0",
                &[&from, &to],
            )
            .await?;
        let per = |k: &str| {
            let c: i64 =
                rows.iter().filter(|r| r.get::<_, String>("kind") == k).map(|r| r.get::<_, i64>("count")).sum();
            c as f64 / n as f64
        };
        let bytes: f64 = rows.iter().map(|r| r.get::<_, i64>("combined_size") as f64).sum::<f64>() / n as f64;
        let records: f64 = rows.iter().map(|r| r.get::<_, i64>("count") as f64).sum::<f64>() / n as f64;
        Ok(format!(
            "manager throughput, WAL per event: {records:.1} records, {bytes:.0} bytes: rows inserted {:.2}, \
             updated {:.2} (HOT {:.2}), locked {:.2}; index entries {:.2}; commits {:.3}",
            per("Heap/INSERT") + per("Heap/INSERT+INIT"),
            per("Heap/UPDATE") + per("Heap/UPDATE+INIT") + per("Heap/HOT_UPDATE") + per("Heap/HOT_UPDATE+INIT"),
            per("Heap/HOT_UPDATE") + per("Heap/HOT_UPDATE+INIT"),
            per("Heap/LOCK"),
            per("Btree/INSERT_LEAF") + per("Btree/INSERT_UPPER") + per("Btree/INSERT_POST"),
            per("Transaction/COMMIT"),
        ))
    }
}
