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

/// Panics unless the open-ended usage projections are exactly the sums of
/// the open-ended allocations, per provider and class and per project, user
/// and class (a project's sum added up over its stripes; rows at zero may
/// stay). Answers how many (provider, class)
/// sums it compared.
pub async fn open_usage_matches_allocations(url: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    for (table, keys) in [
        ("provider_open_usage", "provider_uuid, resource_class"),
        ("project_open_usage", "project_id, user_id, resource_class"),
    ] {
        let rows = client
            .query(
                &format!(
                    "WITH counted AS (SELECT {keys}, sum(used)::int8 AS used FROM {table} GROUP BY {keys}
                                      HAVING sum(used) <> 0),
                          summed AS (SELECT {keys}, sum(used)::int8 AS used FROM allocations
                                     WHERE upper_inf(during) GROUP BY {keys})
                     SELECT 'counted' AS side, d::text AS difference FROM (SELECT * FROM counted EXCEPT SELECT * FROM summed) d
                     UNION ALL
                     SELECT 'summed', d::text FROM (SELECT * FROM summed EXCEPT SELECT * FROM counted) d"
                ),
                &[],
            )
            .await
            .unwrap();
        let differences: Vec<(String, String)> = rows.iter().map(|r| (r.get("side"), r.get("difference"))).collect();
        assert!(differences.is_empty(), "{table} drifted from the allocations: {differences:?}");
    }
    client.query_one("SELECT count(*) AS sums FROM provider_open_usage WHERE used <> 0", &[]).await.unwrap().get("sums")
}

/// Entries in the log.
pub async fn log_length(url: &str) -> i64 {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.query_one("SELECT count(*) AS entries FROM log_events", &[]).await.unwrap().get("entries")
}

/// Panics unless every host's free spans (`host_free_spans`) are exactly
/// the stretches of time none of its allocations holds, with their points,
/// and nothing else is kept. Answers how many spans it compared.
pub async fn free_spans_match_allocations(url: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = client
        .query_one(
            "WITH fresh AS (
                 SELECT h.provider_uuid, lower(f) AS free_from, upper(f) AS free_until
                 FROM hosts h
                 CROSS JOIN LATERAL (SELECT coalesce(range_agg(during), '{}'::tstzmultirange) AS held
                                     FROM allocations a WHERE a.provider_uuid = h.provider_uuid) x
                 CROSS JOIN LATERAL unnest('{(,)}'::tstzmultirange - x.held) AS f
             ), kept AS (SELECT provider_uuid, free_from, free_until FROM host_free_spans)
             SELECT (SELECT count(*) FROM (SELECT * FROM fresh EXCEPT ALL SELECT * FROM kept) m) AS missing,
                    (SELECT count(*) FROM (SELECT * FROM kept EXCEPT ALL SELECT * FROM fresh) s) AS stale,
                    (SELECT count(*) FROM host_free_spans
                     WHERE spot[0] <> coalesce(extract(epoch FROM free_from)::float8, -1e15)
                        OR spot[1] <> coalesce(extract(epoch FROM free_until)::float8, 1e15)) AS misplaced,
                    (SELECT count(*) FROM host_free_spans) AS kept",
            &[],
        )
        .await
        .unwrap();
    let (missing, stale, misplaced): (i64, i64, i64) = (row.get("missing"), row.get("stale"), row.get("misplaced"));
    assert_eq!((missing, stale, misplaced), (0, 0, 0), "free spans missing, stale, misplaced");
    row.get("kept")
}
