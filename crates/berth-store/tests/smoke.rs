use std::collections::BTreeMap;

use berth_core::event::Allocation;
use berth_core::{EventMeta, Inventory, Window};
use berth_store::commands::{ConsumerAllocations, GenerationCheck, NewProvider};
use berth_store::testing::TestDatabase;
use chrono::Utc;
use uuid::Uuid;

#[tokio::test]
async fn claim_then_replay_is_clean() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let meta = EventMeta::default();
    let p = store.create_provider(&meta, NewProvider { uuid: None, name: "h1".into(), parent: None }).await.unwrap();
    let inv = BTreeMap::from([("VCPU".to_string(), Inventory { total: 4, ..Default::default() })]);
    assert_eq!(store.replace_inventories(&meta, p, Some(0), inv).await.unwrap(), 1);
    let claim = |n: i64| ConsumerAllocations {
        consumer: Uuid::new_v4(),
        project_id: "p".into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: GenerationCheck::New,
        allocations: vec![Allocation {
            provider: p,
            resource_class: "VCPU".into(),
            used: n,
            window: Window::from(Utc::now()),
        }],
    };
    store.replace_allocations(&meta, vec![claim(3)]).await.unwrap();
    let err = store.replace_allocations(&meta, vec![claim(2)]).await.unwrap_err();
    assert_eq!(err.kind, berth_core::error::ErrorKind::Capacity);
    store.replace_allocations(&meta, vec![claim(1)]).await.unwrap();
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.events, 4);
}
