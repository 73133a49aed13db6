//! High availability on PostgreSQL's own streaming replication (`make
//! test-ha`): a primary and a synchronous standby started with the
//! project's launcher, two berthd on a URL naming both hosts with
//! `target_session_attrs=read-write`, claims and lease creations driven
//! against them while the primary is stopped as by a crash and the standby
//! promoted. Then: nothing acknowledged is lost, nothing over capacity, 503
//! only during the switch, served again within 5 s, every lease event DONE
//! once with one key, replay verifies on the new primary, and a log reader
//! whose cursor was taken before the switch reads on with no gap or repeat.
//!
//! Ignored by `make test`: it runs clusters of its own, for a while.

// The test times the switch on this machine's clocks; the code under test
// reads only the database's.
#![allow(clippy::disallowed_methods)]

// The upgrade test drives and checks its run with these too.
pub(crate) mod checks;
pub(crate) mod load;
mod reads;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_postgres::LocalPostgres;
use berth_store::testing::TestDatabase;
use berth_testkit::{receiver, Server, ADMIN};
use reqwest::StatusCode;
use serde_json::json;

/// The primary's settings. Synchronous replication is switched on once the
/// standby runs (`ALTER SYSTEM`: a setting on the command line could not be
/// changed so); `fsync` stays off, as in every test cluster: no machine
/// crashes here, a server does.
const PRIMARY: &[(&str, &str)] = &[("fsync", "off"), ("max_connections", "200"), ("wal_level", "replica")];
/// The standby's: the name the primary's `synchronous_standby_names` knows
/// it by. It has none of its own, as a promoted standby with no standby
/// left must not wait for one.
const STANDBY: &[(&str, &str)] = &[("fsync", "off"), ("max_connections", "200"), ("cluster_name", "standby1")];

/// A primary and its synchronous standby, both stopped when dropped.
struct Pair {
    primary: LocalPostgres,
    standby: LocalPostgres,
    _dir: tempfile::TempDir,
}

impl Pair {
    async fn start() -> Pair {
        let dir = tempfile::Builder::new().prefix("berth-ha-").tempdir().unwrap();
        let primary = LocalPostgres::start(&dir.path().join("primary"), PRIMARY, true).expect("start the primary");
        sql(&primary.url("postgres"), "CREATE DATABASE berth").await;
        let standby_dir = dir.path().join("standby");
        primary.base_backup(&standby_dir).expect("base backup");
        let standby = LocalPostgres::start(&standby_dir, STANDBY, true).expect("start the standby");
        // One statement each: ALTER SYSTEM refuses to run in a transaction block.
        sql(&primary.url("postgres"), "ALTER SYSTEM SET synchronous_standby_names = 'standby1'").await;
        sql(&primary.url("postgres"), "SELECT pg_reload_conf()").await;
        wait_until_synchronous(&primary).await;
        Pair { primary, standby, _dir: dir }
    }

    /// The URL berthd is given: both hosts, the primary wanted.
    fn url(&self) -> String {
        format!(
            "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/berth?target_session_attrs=read-write",
            self.primary.port(),
            self.standby.port()
        )
    }
}

async fn sql(url: &str, statements: &str) {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    c.batch_execute(statements).await.unwrap_or_else(|e| panic!("{statements}: {e:?}"));
}

async fn wait_until_synchronous(primary: &LocalPostgres) {
    let (c, conn) = tokio_postgres::connect(&primary.url("postgres"), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..200 {
        let rows = c.query("SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'", &[]).await.unwrap();
        if !rows.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the standby never became synchronous");
}

/// berthd's configuration: short timeouts, so a request during the switch
/// gives up in seconds; short claims and polls; lease events acting on the
/// receiver (`virtual:thing` at once, `physical:host` held on its first call).
fn config(dir: &Path, base: &str) -> PathBuf {
    let path = dir.join("berth.toml");
    let text = format!(
        r#"pool_wait_timeout_ms = 2000
connect_timeout_ms = 2000
statement_timeout_ms = 5000
[manager]
poll_interval_ms = 250
claim_ttl_ms = 2000
retry_min_ms = 50
retry_max_ms = 200
max_attempts = 20
shutdown_grace_ms = 1000
[plugins]
enabled = ["physical:host", "virtual:thing"]
[plugins.drivers."physical:host"]
driver = "webhook"
url = "{base}/hook?hold=1"
timeout_ms = 30000
[plugins.external."virtual:thing"]
driver = "webhook"
url = "{base}/hook?validate=nothing"
timeout_ms = 5000
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "`make test-ha` runs it: it starts a primary and a standby of its own"]
async fn a_failover_mid_run_loses_nothing_acknowledged_and_serves_again_within_5_s() {
    let pair = Pair::start().await;
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &base);
    let db = || TestDatabase { url: pair.url(), name: "berth".into() };
    let a = Server::launch(db(), &[], Some(&cfg)).await;
    let b = Server::launch(db(), &[], Some(&cfg)).await;
    let provider = load::provider(&a).await;
    // A hook in flight across the switch: claimed on the old primary.
    let (st, _) =
        a.post("/v1/os-hosts", ADMIN, json!({"name": "h1", "vcpus": 8, "memory_mb": 1024, "local_gb": 10})).await;
    assert_eq!(st, StatusCode::CREATED);
    let held = load::held_lease(&a).await;
    rx.wait_for(20, "the held lease's start hook", |c| c.iter().any(|c| c.action == "on_start")).await;

    let reader = checks::Reader::start(&pair.url());
    let run = load::Load::start(&[&a, &b], &provider);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = reader.store.log_now().await.expect("a cursor before the switch");
    let stopped = Instant::now();
    let stopped_at = chrono::Utc::now();
    pair.primary.stop_now().expect("stop the primary");
    tokio::time::sleep(Duration::from_secs(1)).await;
    pair.standby.promote().expect("promote the standby");
    let promoted = Instant::now();
    println!("switch: primary stopped, standby promoted {:?} later", promoted - stopped);
    rx.release();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let outcomes = run.stop().await;

    let switch = checks::Switch { stopped, promoted };
    switch.check_answers(&outcomes);
    checks::nothing_acknowledged_lost(&a, &outcomes, &provider).await;
    checks::listening_on_the_new_primary(&pair.standby).await;
    let fired = checks::every_lease_event_done_once(&reader.store, &rx).await;
    // The held lease's start was attempted across the switch.
    let held_start = fired.iter().find(|e| e.lease_id.to_string() == held && e.event_type == "start_lease").unwrap();
    println!("the held start: {} attempts", held_start.attempts);
    let read = reader.stop().await;
    checks::the_log_reads_on(&read, &before, stopped_at).await;
    a.replay_verify();
    a.assert_no_panic();
    b.assert_no_panic();
}
