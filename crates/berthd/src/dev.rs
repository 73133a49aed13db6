//! `berthd dev` and `berthd with-postgres`: a PostgreSQL that the project
//! starts itself.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use berth_api::AuthMode;
use berth_core::{EventMeta, Inventory};
use berth_store::commands::NewProvider;
use berth_store::launcher::THROWAWAY_SETTINGS;
use berth_store::{LocalPostgres, Store};
use tokio_postgres::NoTls;

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
    drop(pg);
    Ok(status.code().unwrap_or(1))
}

pub async fn run(data_dir: &Path, listen: &str) -> Result<()> {
    let pg = LocalPostgres::start(data_dir, &[], true)?;
    let (admin, conn) = tokio_postgres::connect(&pg.url("postgres"), NoTls).await?;
    tokio::spawn(conn);
    if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = 'berth'", &[]).await?.is_none() {
        admin.batch_execute("CREATE DATABASE berth").await?;
    }
    let cfg = Config {
        database_url: pg.url("berth"),
        listen: listen.to_string(),
        auth: AuthMode::Noauth,
        log: std::env::var("BERTH_LOG").unwrap_or_else(|_| "info".into()),
        ..Config::default()
    };
    crate::init_logging(&cfg.log);
    let store = Store::connect(&cfg.database_url, 4)?;
    store.migrate().await?;
    load_demo_inventory(&store).await?;
    println!("Berth is running on http://{listen} (auth: noauth; PostgreSQL: {})", pg.url("berth"));
    println!("  curl http://{listen}/");
    println!("  curl -H 'X-Auth-Token: admin' -H 'OpenStack-API-Version: placement latest' http://{listen}/placement/resource_providers");
    println!("Stop with Ctrl-C; the data stays in {}.", data_dir.display());
    let result = crate::serve(cfg).await;
    drop(pg);
    result
}

/// A few hosts to play with, made once.
async fn load_demo_inventory(store: &Store) -> Result<()> {
    if !store.providers().await?.is_empty() {
        return Ok(());
    }
    let meta =
        EventMeta { actor: Some("berthd-dev".into()), causation: Some("demo inventory".into()), ..Default::default() };
    for (i, (vcpus, mem, disk)) in
        [(16, 65536, 1000), (16, 65536, 1000), (32, 131072, 2000), (8, 32768, 500)].iter().enumerate()
    {
        let name = format!("compute-{}", i + 1);
        let uuid = store.create_provider(&meta, NewProvider { uuid: None, name, parent: None }).await?;
        let inv = BTreeMap::from([
            ("VCPU".to_string(), Inventory { total: *vcpus, ..Default::default() }),
            ("MEMORY_MB".to_string(), Inventory { total: *mem, ..Default::default() }),
            ("DISK_GB".to_string(), Inventory { total: *disk, ..Default::default() }),
        ]);
        store.replace_inventories(&meta, uuid, None, inv).await?;
    }
    tracing::info!("demo inventory loaded: 4 compute hosts");
    Ok(())
}
