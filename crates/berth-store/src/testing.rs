//! Test support: a real PostgreSQL for every test run and a fresh database
//! for every test, made from a migrated template.
//!
//! When `BERTH_TEST_DATABASE_URL` names a server (as `make test` does, after
//! starting one throwaway cluster for the whole run), tests use it. Otherwise
//! the first test in the process starts a throwaway cluster of its own.

use std::sync::OnceLock;

use tokio_postgres::NoTls;

use crate::Store;
use berth_postgres::{LocalPostgres, THROWAWAY_SETTINGS};

/// Advisory lock key held while making the template ("berthtpl").
const TEMPLATE_LOCK: i64 = 0x6265_7274_6874_706c;

struct Server {
    base: String,
    // Kept alive for the process; stopped by the atexit hook.
    _pg: Option<&'static LocalPostgres>,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static OWN_CLUSTER: OnceLock<(LocalPostgres, std::path::PathBuf)> = OnceLock::new();

extern "C" fn stop_own_cluster() {
    if let Some((pg, dir)) = OWN_CLUSTER.get() {
        let _ = pg.stop();
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("BERTH_TEST_DATABASE_URL") {
            let base = url.trim_end_matches('/').to_string();
            return Server { base, _pg: None };
        }
        let dir = tempfile::Builder::new().prefix("berth-test-pg-").tempdir().expect("temp dir").keep();
        let pg = LocalPostgres::start(&dir, THROWAWAY_SETTINGS, false).expect("start a throwaway PostgreSQL");
        let (pg, _) = OWN_CLUSTER.get_or_init(|| (pg, dir));
        // SAFETY: registering a plain extern "C" function with atexit.
        unsafe { libc::atexit(stop_own_cluster) };
        Server { base: pg.base_url(), _pg: Some(pg) }
    })
}

/// The server's URL with the database replaced.
fn url_for(base: &str, db: &str) -> String {
    // The base may or may not name a database; always point at `db`.
    match base.rsplit_once('/') {
        Some((head, tail)) if !head.ends_with('/') && !tail.contains('@') && !tail.contains(':') => {
            format!("{head}/{db}")
        }
        _ => format!("{base}/{db}"),
    }
}

/// A fresh, migrated database for one test.
pub struct TestDatabase {
    pub url: String,
    pub name: String,
}

impl TestDatabase {
    pub async fn new() -> TestDatabase {
        let base = server().base.clone();
        let template = format!("berth_tpl_{}", crate::migrate::fingerprint());
        let (admin, conn) =
            tokio_postgres::connect(&url_for(&base, "postgres"), NoTls).await.expect("connect to test server");
        tokio::spawn(conn);
        admin.execute("SELECT pg_advisory_lock($1)", &[&TEMPLATE_LOCK]).await.unwrap();
        let exists =
            admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&template]).await.unwrap().is_some();
        if !exists {
            admin.batch_execute(&format!("CREATE DATABASE {template}")).await.unwrap();
            let store = Store::connect(&url_for(&base, &template), 1).unwrap();
            store.migrate().await.expect("migrate the template");
            store.pool.close();
            drop(store);
        }
        admin.execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK]).await.unwrap();
        let name = format!("berth_t_{}", uuid::Uuid::new_v4().simple());
        let mut tries = 0;
        loop {
            match admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}")).await {
                Ok(()) => break,
                // Another test copying the template at the same instant.
                Err(_) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("create test database: {e}"),
            }
        }
        TestDatabase { url: url_for(&base, &name), name }
    }

    /// Refreshes the planner's statistics (after a bulk load, as autovacuum
    /// would eventually).
    pub async fn analyze(&self) {
        let (c, conn) = tokio_postgres::connect(&self.url, NoTls).await.expect("connect");
        tokio::spawn(conn);
        c.batch_execute("VACUUM ANALYZE").await.expect("vacuum analyze");
    }

    /// Waits until every transaction of the cluster begun before the call
    /// has ended, so a log reader (which shows only events below the oldest
    /// transaction still running) sees all that was committed by then. Other
    /// tests' transactions on the same cluster count too: that is the wait.
    pub async fn settled(&self) {
        let (c, conn) = tokio_postgres::connect(&self.url, NoTls).await.expect("connect");
        tokio::spawn(conn);
        let next: i64 = c
            .query_one("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next", &[])
            .await
            .expect("snapshot")
            .get("next");
        let started = std::time::Instant::now();
        loop {
            let oldest: i64 = c
                .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS oldest", &[])
                .await
                .expect("snapshot")
                .get("oldest");
            if oldest >= next {
                return;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "a transaction older than {next} still runs after 30 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub fn store(&self, pool_size: usize) -> Store {
        Store::connect(&self.url, pool_size).expect("connect")
    }
}

/// A connection of the store's own, out of its pool and without a
/// deadline, for tests that hold transactions of their own open.
pub async fn connection(store: &Store) -> deadpool_postgres::ClientWrapper {
    let conn = store.client().await.expect("a connection").take();
    conn.into_client()
}

/// Marks `provider` as being written by a new lease, in the transaction
/// `client` has open, as a creation does once it holds the provider's row
/// (`lock::CHOSEN_UNLESS_WRITTEN`): until it ends, new leases pass the
/// provider over rather than queue for it.
pub async fn mark_written(client: &tokio_postgres::Client, provider: uuid::Uuid) -> Result<(), tokio_postgres::Error> {
    client
        .execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2::uuid::text))",
            &[&crate::lock::WRITING_CLASS, &provider],
        )
        .await
        .map(|_| ())
}

/// Appends `events` in `tx` without applying them: for tests of the log
/// alone (commands append and apply together).
pub async fn append(
    tx: &deadpool_postgres::Transaction<'_>,
    meta: &berth_core::EventMeta,
    events: &[berth_core::Event],
) -> Result<Vec<i64>, crate::StoreError> {
    crate::log::append(tx, meta, events).await
}
