//! A few demo hosts to try Berth on (`berthd dev`, or `demo_inventory` in
//! the configuration), made through the store's own commands so that they
//! land in the log like any other.

use std::collections::BTreeMap;

use anyhow::Result;
use berth_core::{EventMeta, Inventory};
use berth_store::commands::NewProvider;
use berth_store::Store;

/// The database `berthd dev` keeps Berth's data in.
pub const DEV_DATABASE: &str = "berth";

/// Four compute hosts, made once (when there is no provider yet).
pub async fn load_inventory(store: &Store) -> Result<()> {
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
