//! A rolling upgrade (`make test-upgrade`, docs/upgrades.md): berthd of the
//! last release (the binary `BERTH_OLD_BERTHD` names, which the make target
//! builds) makes the schema of a fresh database, serves and fires lease
//! events; berthd of this tree starts on the same database, migrates it to
//! this tree's newest migration while the old one serves, and joins.
//! Claims, deletes and lease creations go to both all along, and leases on
//! hosts start and end meanwhile; then the old one stops and the new one
//! goes on alone. Then: every request answered without an error, nothing
//! acknowledged lost, every lease event due DONE once, fired by the old
//! before the new joined and by the new after the old stopped, and replay
//! verifies.
//!
//! Ignored by `make test`: it needs the old binary.

// The test dates leases and times the run on this machine's clock; the
// code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

mod checks;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_postgres::{LocalPostgres, THROWAWAY_SETTINGS};
use berth_store::testing::TestDatabase;
use berth_testkit::{receiver, Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::json;

use crate::ha::load::Load;

/// The variable naming the old release's berthd.
const OLD_BERTHD: &str = "BERTH_OLD_BERTHD";

/// Settings both releases know: short claims and polls; lease events
/// acting on the receiver.
fn config(dir: &Path, base: &str) -> PathBuf {
    let path = dir.join("berth.toml");
    let text = format!(
        r#"[manager]
poll_interval_ms = 250
claim_ttl_ms = 2000
retry_min_ms = 50
retry_max_ms = 200
max_attempts = 20
shutdown_grace_ms = 5000
[plugins]
enabled = ["physical:host", "virtual:thing"]
[plugins.drivers."physical:host"]
driver = "webhook"
url = "{base}/hook"
timeout_ms = 5000
[plugins.external."virtual:thing"]
driver = "webhook"
url = "{base}/hook?validate=nothing"
timeout_ms = 5000
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The newest migration applied to the database.
async fn schema_version(url: &str) -> i32 {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    c.query_one("SELECT max(version) FROM berth_schema_history", &[]).await.unwrap().get(0)
}

/// The newest migration of this tree (`migrations/V<n>__*.sql`).
fn newest_migration() -> i32 {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    std::fs::read_dir(&dir)
        .expect("the migrations")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix('V')?.split_once("__")?.0.parse().ok()
        })
        .max()
        .expect("a migration")
}

/// Hosts, and leases on them whose starts and ends fall during the run:
/// before the new one joins, while both serve, and after the old one stops.
async fn book(s: &Server) -> Vec<String> {
    let mut leases = Vec::new();
    for (i, (start, end)) in [(2, 5), (6, 11), (9, 15)].into_iter().enumerate() {
        let host = json!({"name": format!("h{i}"), "vcpus": 8, "memory_mb": 1024, "local_gb": 10});
        let (st, body) = s.post("/v1/os-hosts", ADMIN, host).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
        let at = |secs| {
            (chrono::Utc::now() + chrono::Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        };
        let body = json!({"name": format!("booked-{i}"), "start_date": at(start), "end_date": at(end),
                          "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
        let (st, l) = s.post("/v1/leases", ALICE, body).await;
        assert_eq!(st, StatusCode::CREATED, "{l}");
        leases.push(l["lease"]["id"].as_str().unwrap().to_string());
    }
    leases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "`make test-upgrade` runs it: it needs berthd of the last release"]
async fn berthd_of_the_tree_migrates_and_joins_while_the_last_release_serves() {
    let old_bin = PathBuf::from(std::env::var(OLD_BERTHD).unwrap_or_else(|_| panic!("{OLD_BERTHD} is not set")));
    let dir = tempfile::Builder::new().prefix("berth-upgrade-").tempdir().unwrap();
    let pg = LocalPostgres::start(&dir.path().join("pg"), THROWAWAY_SETTINGS, true).expect("start PostgreSQL");
    let url = pg.create_database("berth").await.expect("create the database");
    let (rx, base) = receiver::start().await;
    let cfg = config(dir.path(), &base);
    let db = || TestDatabase { url: url.clone(), name: "berth".into() };

    let mut old = Server::launch_bin(&old_bin, db(), &[], Some(&cfg)).await;
    let old_schema = schema_version(&url).await;
    let provider = crate::ha::load::provider(&old).await;
    let booked = book(&old).await;
    let on_old = Load::named(&[&old], &provider, "old");
    tokio::time::sleep(Duration::from_secs(3)).await;

    let (joining, joining_at) = (Instant::now(), chrono::Utc::now());
    let new = Server::launch(db(), &[], Some(&cfg)).await;
    let joined = Instant::now();
    let new_schema = schema_version(&url).await;
    println!(
        "the old berthd made migration {old_schema}; the new one migrated to {new_schema} and joined in {:?}",
        joined - joining
    );
    assert_eq!(new_schema, newest_migration(), "the new berthd migrated to the tree's newest");
    let on_new = Load::named(&[&new], &provider, "new");
    tokio::time::sleep(Duration::from_secs(8)).await;

    let mut outcomes = on_old.stop().await;
    assert!(old.terminate().success(), "the old berthd stopped cleanly:\n{}", old.log());
    let stopped = chrono::Utc::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    outcomes.extend(on_new.stop().await);

    checks::every_answer_clean(&outcomes, joining, joined);
    crate::ha::checks::nothing_acknowledged_lost(&new, &outcomes, &provider).await;
    let store = new.db.store(2);
    let fired = checks::every_lease_event_done_once(&store, &rx).await;
    checks::both_fired(&fired, old.pid(), new.pid(), joining_at, stopped);
    for id in &booked {
        let (_, l) = new.get(&format!("/v1/leases/{id}"), ADMIN).await;
        assert_eq!(l["lease"]["status"], "TERMINATED", "{l}");
    }
    new.replay_verify();
    old.assert_no_panic();
    new.assert_no_panic();
}
