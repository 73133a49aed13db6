//! Shared helpers for the store's tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use berth_core::event::Allocation;
use berth_core::{EventMeta, Inventory, Window};
use berth_store::commands::{ConsumerAllocations, GenerationCheck, NewProvider};
use berth_store::Store;
use uuid::Uuid;

pub fn meta() -> EventMeta {
    EventMeta { actor: Some("test".into()), ..Default::default() }
}

pub async fn provider(store: &Store, name: &str, inv: &[(&str, i64)]) -> Uuid {
    let uuid =
        store.create_provider(&meta(), NewProvider { uuid: None, name: name.into(), parent: None }).await.unwrap();
    set_inventory(store, uuid, inv).await;
    uuid
}

pub async fn set_inventory(store: &Store, uuid: Uuid, inv: &[(&str, i64)]) {
    let inv: BTreeMap<String, Inventory> =
        inv.iter().map(|(c, t)| (c.to_string(), Inventory { total: *t, ..Default::default() })).collect();
    store.replace_inventories(&meta(), uuid, None, inv).await.unwrap();
}

pub fn hold(provider: Uuid, class: &str, used: i64, window: Window) -> Allocation {
    Allocation { provider, resource_class: class.into(), used, window }
}

pub fn consumer(uuid: Uuid, generation: GenerationCheck, allocations: Vec<Allocation>) -> ConsumerAllocations {
    ConsumerAllocations {
        consumer: uuid,
        project_id: "project".into(),
        user_id: "user".into(),
        consumer_type: None,
        generation,
        allocations,
    }
}
