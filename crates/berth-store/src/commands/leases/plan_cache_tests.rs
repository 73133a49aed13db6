//! A lease creation runs its statements on their generic plans
//! (`sql::GENERIC_PLANS`): planned anew on every run, the reads of a small
//! cloud cost the server more to plan than to run (0.6 ms of a 3.7 ms
//! creation on 10 hosts). These tests check that creations plan nothing
//! once their statements are prepared, and that the plans, made on an
//! empty database, look rows up by key rather than scan a table.

use std::collections::{BTreeMap, HashMap};

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use chrono::{Duration, TimeZone, Utc};
use serde_json::json;

use crate::client::GenericClient;
use crate::commands::{LeaseDates, NewHost, NewLease, NewReservation};
use crate::plan_checks::{check, generic_plan};
use crate::testing::TestDatabase;
use crate::Store;

/// Each statement prepared on the store's one connection: how many times
/// it was planned generically and for its values.
async fn plans(store: &Store) -> HashMap<String, (i64, i64)> {
    let c = store.client().await.unwrap();
    let rows = c.query("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements", &[]).await.unwrap();
    rows.iter().map(|r| (r.get("statement"), (r.get("generic_plans"), r.get("custom_plans")))).collect()
}

async fn create(store: &Store, k: i64) {
    let base = Utc.with_ymd_and_hms(2031, 1, 1, 0, 0, 0).unwrap();
    let (start, end) = (base + Duration::hours(3 * k), base + Duration::hours(3 * k + 2));
    let demand = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    let new = NewLease {
        name: format!("l{k}"),
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(start), end: DateSpec::At(end), before_end: None },
        reservations: vec![NewReservation { resource_type: "physical:host".into(), params: json!({}), demand }],
    };
    store.create_lease(&EventMeta::default(), new).await.unwrap();
}

#[tokio::test]
async fn creations_on_a_small_cloud_plan_nothing_anew() {
    let db = TestDatabase::new().await;
    // One connection: the one these creations run on, and the one read.
    let store = db.store(1);
    for i in 0..10 {
        let new = NewHost {
            name: format!("h{i}"),
            resources: Some((8, 1024, 10)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        store.enrol_host(&EventMeta::default(), new).await.unwrap();
    }
    // The first creations prepare the statements (and count the hosts).
    for k in 0..3 {
        create(&store, k).await;
    }
    let before = plans(&store).await;
    for k in 3..15 {
        create(&store, k).await;
    }
    let after = plans(&store).await;
    let mut reused = 0;
    for (statement, (generic, custom)) in &after {
        let (generic_before, custom_before) = before.get(statement).copied().unwrap_or((0, 0));
        assert_eq!(*custom, custom_before, "planned for its values by a creation:\n{statement}");
        if generic - generic_before >= 12 {
            reused += 1;
        }
    }
    // The reads of every host, their holds and gaps, the lock, the log's
    // append and the rows written: each run once by every creation.
    assert!(reused >= 8, "only {reused} statements ran on a generic plan in each creation");
}

#[tokio::test]
async fn creation_statements_look_rows_up_by_key_from_the_start() {
    let db = TestDatabase::new().await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    for (sql, params) in [
        (super::NAME_TAKEN, 3),
        (super::small::HOSTS_UP_TO, 1),
        (crate::lock::GUARD_INSERT, 1),
        (crate::lock::GUARD_LOCK, 1),
        (crate::quota::LIMITS, 2),
        (crate::lock::CHOSEN, 2),
        (crate::lock::CHOSEN_UNLESS_WRITTEN, 2),
    ] {
        check(&generic_plan(&client, sql, params).await, &[], &[]);
    }
}
