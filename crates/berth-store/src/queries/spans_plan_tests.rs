//! The walk of the free spans is a walk of their GiST index ordered by
//! distance to the window's point, stopped after the spans asked for, on
//! the plan made for no values the creation's transaction runs it on
//! (`sql::GENERIC_PLANS`). Reading the point from a subquery once left the
//! index unordered: every span holding the window was read and sorted.

use crate::testing::TestDatabase;

#[tokio::test]
async fn the_walk_is_ordered_by_the_index() {
    let db = TestDatabase::new().await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute("BEGIN").await.unwrap();
    client.query(crate::sql::GENERIC_PLANS, &[]).await.unwrap();
    client.query(super::super::near::INDEXED, &[]).await.unwrap();
    let prepare =
        format!("PREPARE nearest (timestamptz, timestamptz, float8, text, jsonb, int8, int8) AS {}", super::NEAREST);
    client.batch_execute(&prepare).await.unwrap();
    // Any values: the plan made for none is what is checked.
    let explain = "EXPLAIN EXECUTE nearest ('2030-01-01 10:00Z', '2030-01-01 12:00Z', 0, 'p', '{}', 72, 18)";
    let plan = client.query(explain, &[]).await.unwrap();
    let plan = plan.iter().map(|r| r.get::<_, String>("QUERY PLAN")).collect::<Vec<_>>().join("\n");
    assert!(plan.contains("Index Scan using host_free_spans_spot on host_free_spans"), "{plan}");
    assert!(plan.contains("Order By: (spot <-> point("), "the walk is not ordered by the index:\n{plan}");
    client.batch_execute("ROLLBACK").await.unwrap();
}
