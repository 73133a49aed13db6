//! What the claim scenarios start from.

use std::collections::BTreeMap;

use anyhow::Result;
use berth_core::{EventMeta, Inventory};
use berth_store::commands::NewProvider;
use berth_store::Store;
use uuid::Uuid;

/// `count` providers named `{prefix}{i}`, each with this VCPU and MEMORY_MB
/// inventory.
pub async fn providers(
    store: &Store,
    meta: &EventMeta,
    count: usize,
    prefix: &str,
    vcpu: i64,
    memory_mb: i64,
) -> Result<Vec<Uuid>> {
    let mut providers = Vec::with_capacity(count);
    for i in 0..count {
        let p =
            store.create_provider(meta, NewProvider { uuid: None, name: format!("{prefix}{i}"), parent: None }).await?;
        let inv = BTreeMap::from([
            ("VCPU".to_string(), Inventory { total: vcpu, ..Default::default() }),
            ("MEMORY_MB".to_string(), Inventory { total: memory_mb, ..Default::default() }),
        ]);
        store.replace_inventories(meta, p, None, inv).await?;
        providers.push(p);
    }
    Ok(providers)
}
