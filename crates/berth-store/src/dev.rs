//! A database to try Berth on (`berthd dev`): Berth's database on a local
//! cluster the launcher started, and a few demo hosts made through the
//! store's own commands, so that they land in the log like any other.

use std::collections::BTreeMap;

use anyhow::Result;
use berth_core::{EventMeta, Inventory};
use tokio_postgres::NoTls;

use crate::commands::NewProvider;
use crate::{LocalPostgres, Store};

/// The database `berthd dev` keeps Berth's data in.
pub const DEV_DATABASE: &str = "berth";

/// Makes [`DEV_DATABASE`] on `pg` unless it is there; answers its URL.
pub async fn create_database(pg: &LocalPostgres) -> Result<String> {
    let (admin, conn) = tokio_postgres::connect(&pg.url("postgres"), NoTls).await?;
    tokio::spawn(conn);
    if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&DEV_DATABASE]).await?.is_none() {
        admin.batch_execute(&format!("CREATE DATABASE {DEV_DATABASE}")).await?;
    }
    Ok(pg.url(DEV_DATABASE))
}

/// A few hosts to play with, made once (when there is no provider yet).
pub async fn load_demo_inventory(store: &Store) -> Result<()> {
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
