//! Advice reads the instants holds end at by skipping through the index of
//! ends ([`super::INSTANTS`]), and within an instant walks that index in
//! its order ([`super::ENDS`]), both planned for their values as
//! `near::CUSTOM` plans them: on a plan made for no values, every hold in
//! the search range was read, joined and sorted, 48 ms a page at 10,000
//! hosts with ten leases each.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::testing::TestDatabase;

/// The plan of `statement` with `params`, on an empty database, as
/// `near::CUSTOM` has it planned.
async fn plan(statement: &str, params: &[&(dyn ToSql + Sync)]) -> String {
    let db = TestDatabase::new().await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute("BEGIN").await.unwrap();
    client.query(super::super::near::CUSTOM, &[]).await.unwrap();
    let plan = client.query(&format!("EXPLAIN {statement}"), params).await.unwrap();
    client.batch_execute("ROLLBACK").await.unwrap();
    plan.iter().map(|r| r.get::<_, String>("QUERY PLAN")).collect::<Vec<_>>().join("\n")
}

/// Whether a line of `plan` sorts what the line under it reads from `table`.
fn sorts(plan: &str, table: &str) -> bool {
    let lines: Vec<&str> = plan.lines().collect();
    lines.windows(2).any(|w| w[0].contains("Sort  (") && w[1].contains(table))
}

#[tokio::test]
async fn a_page_of_ends_walks_the_index_in_order() {
    // Any instants: the plan is what is checked.
    let from = DateTime::<Utc>::from_timestamp(1_900_000_000, 0).unwrap();
    let to = from + Duration::days(30);
    let texts: Vec<Value> = vec![json!({})];
    let plan = plan(super::ENDS, &[&from, &to, &texts, &super::HOSTS, &Uuid::nil()]).await;
    assert!(plan.contains("Index Scan using allocations_bounded_end_host on allocations"), "{plan}");
    assert!(!plan.contains("Bitmap Heap Scan on allocations"), "{plan}");
    assert!(!sorts(&plan, "a.during"), "the holds are sorted:\n{plan}");
}

#[tokio::test]
async fn a_page_of_instants_skips_through_the_indexes() {
    let from = DateTime::<Utc>::from_timestamp(1_900_000_000, 0).unwrap();
    let to = from + Duration::days(30);
    let texts: Vec<Value> = vec![json!({})];
    let plan = plan(super::INSTANTS, &[&from, &to, &texts, &super::PAGE, &super::FIRST_HOSTS]).await;
    // Each skip and each instant's first hosts: the index of ends in order.
    assert!(plan.contains("using allocations_bounded_end_host on allocations"), "{plan}");
    assert!(plan.contains("using maintenance_windows_end on maintenance_windows"), "{plan}");
    // The hosts naming their own cleaning time: the few the index holds.
    assert!(plan.contains("using hosts_own_cleaning on hosts"), "{plan}");
    for table in ["allocations", "hosts", "maintenance_windows"] {
        assert!(!plan.contains(&format!("Seq Scan on {table}")), "{table} read whole:\n{plan}");
        assert!(!plan.contains(&format!("Bitmap Heap Scan on {table}")), "{table} read by bitmap:\n{plan}");
    }
    assert!(!sorts(&plan, "a.during") && !sorts(&plan, "m.during"), "the ends are sorted:\n{plan}");
}
