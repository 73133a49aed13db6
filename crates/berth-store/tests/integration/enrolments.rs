//! Many hosts enrolled at once (`Store::enrol_hosts`): each as one
//! enrolment would make it, all or none, and refused as one enrolment is.

use std::collections::BTreeSet;

use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::lease::FREE_POOL;
use berth_store::commands::{NewHost, NewProvider};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use serde_json::json;
use tokio_postgres::NoTls;
use uuid::Uuid;

use crate::common::{log_length, meta};

fn new_host(name: &str, resources: Option<(i64, i64, i64)>, caps: serde_json::Value) -> NewHost {
    let capabilities = serde_json::from_value(caps).unwrap();
    NewHost { name: name.into(), resources, reservable: true, capabilities }
}

/// A Placement provider with an aggregate of its own, not yet a host.
async fn provider(store: &Store, name: &str, aggregate: Uuid) -> Uuid {
    let id = store.create_provider(&meta(), NewProvider { uuid: None, name: name.into(), parent: None }).await.unwrap();
    store.replace_aggregates(&meta(), id, None, BTreeSet::from([aggregate]), true).await.unwrap();
    id
}

#[tokio::test]
async fn many_hosts_enrolled_at_once_are_each_as_one_enrolment_makes_it() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let aggregate = Uuid::new_v4();
    let placed = provider(&store, "placed", aggregate).await;
    let single =
        store.enrol_host(&meta(), new_host("single", Some((4, 4096, 0)), json!({"rack": "r0"}))).await.unwrap();
    let mut batch: Vec<NewHost> = (0..40)
        .map(|i| {
            new_host(&format!("n{i:02}"), Some((8 + i, 16_384, i % 2 * 100)), json!({"rack": format!("r{}", i % 3)}))
        })
        .collect();
    batch.insert(7, new_host("placed", None, json!({"gpu": true})));
    let ids = store.enrol_hosts(&meta(), batch.clone()).await.unwrap();
    assert_eq!(ids.len(), 41);
    assert_eq!(ids[7], placed, "an existing provider is enrolled as it is");
    for (new, id) in batch.iter().zip(&ids) {
        let host = store.host(*id).await.unwrap();
        assert_eq!((&host.name, host.reservable, &host.capabilities), (&new.name, true, &new.capabilities));
        if let Some((vcpus, memory_mb, local_gb)) = new.resources {
            assert_eq!((host.vcpus, host.memory_mb, host.local_gb), (vcpus, memory_mb, local_gb));
        }
    }
    // Each provider is in the free pool, the existing one in its own aggregate too.
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let pooled: i64 = c
        .query_one("SELECT count(*) AS n FROM provider_aggregates WHERE aggregate = $1", &[&FREE_POOL])
        .await
        .unwrap()
        .get("n");
    assert_eq!(pooled, 42);
    let kept: i64 = c
        .query_one("SELECT count(*) AS n FROM provider_aggregates WHERE aggregate = $1", &[&aggregate])
        .await
        .unwrap()
        .get("n");
    assert_eq!(kept, 1);
    // The generations as one enrolment at a time leaves them.
    let generation = |id: Uuid| {
        let c = &c;
        async move {
            c.query_one("SELECT generation FROM providers WHERE uuid = $1", &[&id]).await.unwrap().get::<_, i64>(0)
        }
    };
    assert_eq!(generation(ids[0]).await, generation(single).await);
    let props = store.host_properties(true).await.unwrap();
    assert_eq!(props.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["gpu", "rack"]);
    assert_eq!(store.hosts(None, 1000).await.unwrap().len(), 42);
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test]
async fn a_bulk_enrolment_refused_for_one_host_writes_nothing() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    store.enrol_host(&meta(), new_host("taken", Some((4, 4096, 0)), json!({}))).await.unwrap();
    let before = log_length(&db.url).await;
    let many = |odd: NewHost| {
        let mut hosts: Vec<NewHost> =
            (0..20).map(|i| new_host(&format!("h{i}"), Some((4, 4096, 10)), json!({}))).collect();
        hosts.insert(10, odd);
        hosts
    };
    let e = store.enrol_hosts(&meta(), many(new_host("taken", None, json!({})))).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::HostExists, "{e}");
    assert!(e.to_string().contains("taken"), "{e}");
    let e = store.enrol_hosts(&meta(), many(new_host("nowhere", None, json!({})))).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = store.enrol_hosts(&meta(), many(new_host("h3", Some((4, 4096, 10)), json!({})))).await.unwrap_err();
    assert_eq!((e.kind, e.to_string().contains("h3")), (ErrorKind::Invalid, true), "{e}");
    let e = store.enrol_hosts(&meta(), many(new_host("bad", Some((0, 4096, 10)), json!({})))).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let e = store.enrol_hosts(&meta(), many(new_host("odd", Some((4, 4096, 10)), json!({"id": 1})))).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert_eq!(log_length(&db.url).await, before, "nothing recorded");
    assert_eq!(store.hosts(None, 1000).await.unwrap().len(), 1);
    assert!(store.enrol_hosts(&meta(), Vec::new()).await.unwrap().is_empty());
}

/// Two bulk enrolments naming one existing provider, at once: one enrols
/// it, the other is refused as an enrolment of a host already enrolled,
/// whichever waited for the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_bulk_enrolments_of_one_provider_enrol_it_once() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    for round in 0..5 {
        let name = format!("shared-{round}");
        provider(&store, &name, Uuid::new_v4()).await;
        let batch = |side: &str| {
            let mut hosts: Vec<NewHost> =
                (0..30).map(|i| new_host(&format!("{side}-{round}-{i}"), Some((4, 4096, 10)), json!({}))).collect();
            hosts.push(new_host(&name, None, json!({})));
            hosts
        };
        let m = meta();
        let (a, b) = tokio::join!(store.enrol_hosts(&m, batch("a")), store.enrol_hosts(&m, batch("b")));
        let refused: Vec<_> = [&a, &b].into_iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(refused.len(), 1, "{a:?} {b:?}");
        assert_eq!(refused[0].code, ErrorCode::HostExists, "{}", refused[0]);
    }
    assert_eq!(store.hosts(None, 1000).await.unwrap().len(), 5 * 31);
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
}
