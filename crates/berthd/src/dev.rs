//! `berthd dev` and `berthd with-postgres`: a PostgreSQL that the project
//! starts itself. Wiring only: the launcher is berth-postgres', the demo
//! inventory [`crate::demo`]'s.

use std::path::Path;

use anyhow::{Context, Result};
use berth_api::AuthMode;
use berth_postgres::{LocalPostgres, THROWAWAY_SETTINGS};

use crate::config::Config;

/// Runs `command` with a throwaway cluster; returns its exit code.
pub fn with_postgres(command: &[String]) -> Result<i32> {
    let dir = tempfile::Builder::new().prefix("berth-pg-").tempdir()?;
    let pg = LocalPostgres::start(dir.path(), THROWAWAY_SETTINGS, true)?;
    eprintln!("berthd: throwaway PostgreSQL on {}", pg.base_url());
    let status = std::process::Command::new(&command[0])
        .args(&command[1..])
        .env("BERTH_TEST_DATABASE_URL", pg.url("postgres"))
        .env("BERTH_PG_URL", pg.base_url())
        .env("BERTH_PG_BIN", pg.bin_dir())
        .status()
        .with_context(|| format!("running {}", command[0]))?;
    // The command's status is the answer; a failed stop is only said.
    if let Err(e) = pg.throw_away() {
        eprintln!("berthd: stopping the throwaway PostgreSQL: {e:#}");
    }
    remove_in_parallel(dir.path());
    Ok(status.code().unwrap_or(1))
}

/// Deletes the databases under a cluster's data directory a few at a time
/// ([`tempfile::TempDir`] removes the rest): after a test run they are
/// some hundred thousand files, ten seconds of unlinking one by one.
fn remove_in_parallel(data_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(data_dir.join("base")) else {
        return;
    };
    let databases: Vec<std::path::PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(db) = databases.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    let _ = std::fs::remove_dir_all(db);
                }
            });
        }
    });
}

pub async fn run(data_dir: &Path, listen: &str, auth: AuthMode) -> Result<()> {
    // The settings first: a bad one is said before a cluster is made.
    let mut cfg = Config { listen: listen.to_string(), auth, demo_inventory: true, ..Config::load(None)? };
    let pg = LocalPostgres::start(data_dir, &[], true)?;
    cfg.database_url = pg.create_database(crate::demo::DEV_DATABASE).await?;
    crate::init_logging(&cfg.log)?;
    println!("Berth is running on http://{listen} (auth: {}; PostgreSQL: {})", auth.as_str(), cfg.database_url);
    println!("  curl http://{listen}/");
    if auth == AuthMode::Noauth {
        println!("  curl -H 'X-Auth-Token: admin' -H 'OpenStack-API-Version: placement latest' http://{listen}/placement/resource_providers");
    }
    // The one-off commands (replay --verify, migrate) read the database
    // from the environment: say what to set, since the port is this run's.
    println!("  BERTH_DATABASE_URL={} berthd replay --verify", cfg.database_url);
    println!("Stop with Ctrl-C; the data stays in {}.", data_dir.display());
    let result = crate::serve(cfg).await;
    drop(pg);
    result
}
