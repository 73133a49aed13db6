//! A run of enrolments' events writes what applying them one by one does.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::lease::FREE_POOL;
use berth_core::{Event, Inventory};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use uuid::Uuid;

use crate::projection::{apply, apply_all, run_key, TABLES};
use crate::testing::TestDatabase;

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap() + Duration::minutes(minutes)
}

fn inventories(vcpus: i64, disk: bool) -> BTreeMap<String, Inventory> {
    let mut out = BTreeMap::from([
        ("VCPU".to_string(), Inventory { total: vcpus, reserved: 1, allocation_ratio: 2.0, ..Default::default() }),
        ("MEMORY_MB".to_string(), Inventory { total: 4096, step_size: 512, ..Default::default() }),
    ]);
    if disk {
        out.insert("DISK_GB".into(), Inventory { total: 100, max_unit: 50, ..Default::default() });
    }
    out
}

fn capabilities(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, serde_json::Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// A provider that exists before, with inventories, an aggregate and a
/// known property, then three new hosts and the old provider enrolled as a
/// bulk enrolment groups them: every kind, each at its own time, an
/// inventory and an aggregate replaced, one aggregate change that does not
/// bump, a capability first named at the earlier of two times.
fn events() -> (Vec<Event>, Vec<Event>) {
    let (old, agg) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let hosts = [Uuid::from_u128(11), Uuid::from_u128(12), Uuid::from_u128(13)];
    let before = vec![
        Event::ProviderCreated { uuid: old, name: "old".into(), parent: None, at: at(0) },
        Event::InventoriesReplaced { provider: old, inventories: inventories(4, false), at: at(1) },
        Event::ProviderAggregatesReplaced { provider: old, aggregates: BTreeSet::from([agg]), bump: true, at: at(2) },
        Event::HostPropertyChanged { name: "rack".into(), private: true, at: at(3) },
    ];
    let mut run = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        run.push(Event::ProviderCreated { uuid: *h, name: format!("h{i}"), parent: None, at: at(10 + i as i64) });
    }
    for (i, h) in hosts.iter().chain([&old]).enumerate() {
        run.push(Event::InventoriesReplaced {
            provider: *h,
            inventories: inventories(8 + i as i64, i % 2 == 0),
            at: at(20 + i as i64),
        });
    }
    run.push(Event::ProviderAggregatesReplaced {
        provider: hosts[0],
        aggregates: BTreeSet::from([FREE_POOL]),
        bump: true,
        at: at(30),
    });
    run.push(Event::ProviderAggregatesReplaced {
        provider: old,
        aggregates: BTreeSet::from([agg, FREE_POOL]),
        bump: false,
        at: at(31),
    });
    run.push(Event::ProviderAggregatesReplaced {
        provider: hosts[1],
        aggregates: BTreeSet::from([FREE_POOL, agg]),
        bump: true,
        at: at(32),
    });
    let enrolled = [
        (hosts[0], true, capabilities(&[("rack", json!("r1")), ("gpu", json!(true))])),
        (hosts[1], false, capabilities(&[("rack", json!("r2")), ("zone", json!(3))])),
        (old, true, capabilities(&[])),
        (hosts[2], true, capabilities(&[("gpu", json!(false)), ("zone", json!("b"))])),
    ];
    for (i, (provider, reservable, capabilities)) in enrolled.into_iter().enumerate() {
        run.push(Event::HostEnrolled { provider, reservable, capabilities, at: at(40 + i as i64) });
    }
    (before, run)
}

/// Every projected table, as sorted JSON rows.
async fn tables(db: &TestDatabase) -> Vec<(String, String)> {
    let store = db.store(1);
    let c = store.client().await.unwrap();
    let mut out = Vec::new();
    for table in TABLES {
        let sql = format!(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text), '[]')::text AS rows FROM {table} t"
        );
        out.push((table.to_string(), c.query_one(sql.as_str(), &[]).await.unwrap().get("rows")));
    }
    out
}

#[tokio::test]
async fn a_run_of_enrolments_writes_what_one_event_at_a_time_writes() {
    let (before, run) = events();
    let (runs, one_by_one) = (TestDatabase::new().await, TestDatabase::new().await);
    for db in [&runs, &one_by_one] {
        let store = db.store(1);
        let c = store.client().await.unwrap();
        for e in &before {
            apply(&*c, e).await.unwrap();
        }
    }
    let refs: Vec<&Event> = run.iter().collect();
    // The events fall in four runs, one per kind.
    let kinds: BTreeSet<u8> = refs.iter().map(|e| run_key(e).expect("written in a run").0).collect();
    assert_eq!(kinds.len(), 4);
    {
        let store = runs.store(1);
        apply_all(&*store.client().await.unwrap(), &refs).await.unwrap();
        let store = one_by_one.store(1);
        let c = store.client().await.unwrap();
        for e in &run {
            apply(&*c, e).await.unwrap();
        }
    }
    let (a, b) = (tables(&runs).await, tables(&one_by_one).await);
    for ((table, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x, y, "{table} differs");
    }
    assert!(a.iter().any(|(t, rows)| t == "hosts" && rows.contains("r2")), "the hosts were written");
}
