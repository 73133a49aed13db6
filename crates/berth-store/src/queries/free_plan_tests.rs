//! Advice pages the instants holds end in ([`super::ENDS`]) as a walk of
//! `allocations_bounded_end_host` (V67) in its order, stopped after a page,
//! planned for its values as `near::CUSTOM` plans it: on a plan made for no
//! values, every hold in the search range was read, joined and sorted, 48 ms
//! a page at 10,000 hosts with ten leases each.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::testing::TestDatabase;

#[tokio::test]
async fn a_page_of_ends_walks_the_index_in_order() {
    let db = TestDatabase::new().await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute("BEGIN").await.unwrap();
    client.query(super::super::near::CUSTOM, &[]).await.unwrap();
    // Any instants: the plan is what is checked.
    let from = DateTime::<Utc>::from_timestamp(1_900_000_000, 0).unwrap();
    let to = from + Duration::days(30);
    let texts: Vec<Value> = vec![json!({})];
    let plan = client
        .query(&format!("EXPLAIN {}", super::ENDS), &[&from, &to, &texts, &super::PAGE, &Uuid::nil()])
        .await
        .unwrap();
    let plan = plan.iter().map(|r| r.get::<_, String>("QUERY PLAN")).collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Index Scan using allocations_bounded_end_host on allocations"), "{plan}");
    assert!(!plan.contains("Bitmap Heap Scan on allocations"), "{plan}");
    // A sort of the holds (the maintenance windows, few, may be sorted).
    let lines: Vec<&str> = plan.lines().collect();
    let sorted = lines.windows(2).any(|w| w[0].contains("Sort  (") && w[1].contains("a.during"));
    assert!(!sorted, "the holds are sorted:\n{plan}");
    client.batch_execute("ROLLBACK").await.unwrap();
}
