//! Backups (docs/backups.md): a database with hosts, leases started and
//! ended, claims and quotas, made through the API, dumped with `pg_dump
//! -Fc` and restored with `pg_restore` into a fresh database; there replay
//! verifies, the API reads as it did on the original, and a key a lease
//! was made with is still known. A restored copy tampered with fails the
//! verify, so a clean verify means something.

// Leases are dated from the real clock, which is the database's (one
// machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use berth_postgres::LocalPostgres;
use berth_store::testing::TestDatabase;
use berth_testkit::{berthd_bin, Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Short polls, so the leases start and end within the test.
const CONFIG: &str = "[manager]\npoll_interval_ms = 250\nclaim_ttl_ms = 2000\n";

/// A lease of one host as alice, from `start` to `end`; its id.
async fn lease(s: &Server, name: &str, start: &str, end: &str) -> String {
    let body = json!({"name": name, "start_date": start, "end_date": end,
                      "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    l["lease"]["id"].as_str().unwrap().to_string()
}

fn in_secs(s: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(s)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A lease made with an Idempotency-Key; its status and body.
async fn lease_with_key(s: &Server, key: &str) -> (StatusCode, Value) {
    let body = json!({"name": "keyed", "start_date": "2999-01-01 00:00", "end_date": "2999-01-02 00:00",
                      "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/leases", s.url))
        .header("x-auth-token", ALICE)
        .header("idempotency-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

/// Hosts, quotas, a provider with claims, and leases: one ended, one
/// started, one ahead; the provider's uuid once the manager has run them.
async fn fill(s: &Server) -> String {
    for h in ["h1", "h2", "h3", "h4"] {
        let (st, body) =
            s.post("/v1/os-hosts", ADMIN, json!({"name": h, "vcpus": 8, "memory_mb": 1024, "local_gb": 10})).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
    }
    let (st, body) = s.put("/v1/quotas/projects/p1", ADMIN, json!({"quotas": {"VCPU": 64}})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let (st, rp) = s.post("/placement/resource_providers", ADMIN, json!({"name": "compute-1"})).await;
    assert!(st.is_success(), "{rp}");
    let (_, rps) = s.get("/placement/resource_providers?name=compute-1", ADMIN).await;
    let rp = rps["resource_providers"][0]["uuid"].as_str().unwrap().to_string();
    let inv = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 16}}});
    let (st, body) = s.put(&format!("/placement/resource_providers/{rp}/inventories"), ADMIN, inv).await;
    assert!(st.is_success(), "{body}");
    for vcpus in [1, 2, 3] {
        let claim = json!({"allocations": {&rp: {"resources": {"VCPU": vcpus}}},
                           "project_id": "p1", "user_id": "alice", "consumer_generation": null});
        let path = format!("/allocations/{}", uuid::Uuid::new_v4());
        let (st, body) = s.placement(reqwest::Method::PUT, &path, ADMIN, "1.28", claim).await;
        assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    }
    let ended = lease(s, "ended", "now", &in_secs(1)).await;
    let started = lease(s, "started", "now", "2999-01-01 00:00").await;
    lease(s, "ahead", "2998-01-01 00:00", "2998-01-02 00:00").await;
    let (st, _) = lease_with_key(s, "backup-key-1").await;
    assert_eq!(st, StatusCode::CREATED);
    wait_status(s, &ended, "TERMINATED").await;
    wait_status(s, &started, "ACTIVE").await;
    rp
}

async fn wait_status(s: &Server, id: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, l) = s.get(&format!("/v1/leases/{id}"), ADMIN).await;
        if l["lease"]["status"] == status {
            return;
        }
        assert!(Instant::now() < deadline, "lease {id} never {status}: {l}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What an operator would look at: leases, hosts, quotas, usages.
async fn reads(s: &Server, rp: &str) -> Vec<Value> {
    let paths = [
        "/v1/leases".to_string(),
        "/v1/os-hosts".to_string(),
        "/v1/quotas/projects/p1".to_string(),
        format!("/placement/resource_providers/{rp}/usages"),
    ];
    let mut out = Vec::new();
    for p in paths {
        let (st, body) = s.get(&p, ADMIN).await;
        assert_eq!(st, StatusCode::OK, "{p}: {body}");
        out.push(json!({ p: body }));
    }
    out
}

fn pg_tool(name: &str) -> std::path::PathBuf {
    LocalPostgres::find_bin_dir().expect("PostgreSQL's binaries").join(name)
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run a PostgreSQL tool");
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `pg_dump -Fc` of `from`, restored into a new database on the same
/// server; the new database's URL.
async fn dump_and_restore(from: &TestDatabase, dir: &Path) -> String {
    let dump = dir.join("berth.dump");
    run(Command::new(pg_tool("pg_dump")).args(["-Fc", "-f"]).arg(&dump).arg(&from.url));
    let name = format!("{}_restored", from.name);
    sql(&from.url, &format!("CREATE DATABASE {name}")).await;
    let url = format!("{}{name}", from.url.strip_suffix(&from.name).expect("the URL ends with its database"));
    run(Command::new(pg_tool("pg_restore")).args(["--no-owner", "--exit-on-error", "-d", &url]).arg(&dump));
    url
}

async fn sql(url: &str, statements: &str) {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    c.batch_execute(statements).await.unwrap_or_else(|e| panic!("{statements}: {e:?}"));
}

/// `berthd replay --verify` on `url`: whether it passed, and what it said.
fn replay_verify(url: &str) -> (bool, String) {
    let out = Command::new(berthd_bin())
        .args(["replay", "--verify"])
        .env("BERTH_DATABASE_URL", url)
        .env("BERTH_LOG", "warn")
        .output()
        .expect("run berthd replay");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_restored_into_a_fresh_database_verifies_and_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("berth.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let original = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let rp = fill(&original).await;
    let before = reads(&original, &rp).await;
    assert_eq!(before[0]["/v1/leases"]["leases"].as_array().map(Vec::len), Some(4), "{}", before[0]);
    // berthd keeps serving: pg_dump reads one snapshot.
    let url = dump_and_restore(&original.db, dir.path()).await;

    let (clean, said) = replay_verify(&url);
    assert!(clean && said.contains("projections match the log"), "the restored copy differs:\n{said}");
    let db = TestDatabase { url: url.clone(), name: String::new() };
    let restored = Server::launch(db, &[("BERTH_MANAGER__ENABLED", "false")], Some(&cfg)).await;
    assert_eq!(reads(&restored, &rp).await, before, "the restored copy reads as the original did");
    // The key the lease was made with is in the copy: the retry gets that lease.
    let (st, again) = lease_with_key(&restored, "backup-key-1").await;
    let (_, first) = lease_with_key(&original, "backup-key-1").await;
    assert_eq!(st, StatusCode::CREATED, "{again}");
    assert_eq!(again["lease"]["id"], first["lease"]["id"], "a retried create after the restore makes nothing new");

    // A projection row changed behind the log's back is found.
    sql(&url, "UPDATE leases SET name = 'tampered' WHERE name = 'started'").await;
    let (clean, said) = replay_verify(&url);
    assert!(!clean && said.contains("DIFFERENT leases"), "the tampered copy verified:\n{said}");
    original.assert_no_panic();
    restored.assert_no_panic();
}
