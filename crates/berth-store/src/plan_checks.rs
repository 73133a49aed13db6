//! What the tests of generic plans share: a statement's generic plan, made
//! as `sql::GENERIC_PLANS` makes it, and a check of what it reads.

/// The generic plan of `sql` (its parameters' types inferred), as EXPLAIN prints it.
pub(crate) async fn generic_plan(client: &tokio_postgres::Client, sql: &str, params: usize) -> String {
    client.batch_execute("BEGIN").await.unwrap();
    client.query(crate::sql::GENERIC_PLANS, &[]).await.unwrap();
    client.batch_execute(&format!("PREPARE s AS {sql}")).await.unwrap();
    let nulls = vec!["NULL"; params].join(", ");
    let rows = client.query(&format!("EXPLAIN EXECUTE s({nulls})"), &[]).await.unwrap();
    client.batch_execute("ROLLBACK; DEALLOCATE s").await.unwrap();
    rows.iter().map(|r| r.get::<_, String>("QUERY PLAN")).collect::<Vec<_>>().join("\n")
}

pub(crate) fn check(plan: &str, uses: &[&str], never: &[&str]) {
    assert!(!plan.contains("Seq Scan on"), "a table is scanned:\n{plan}");
    for index in uses {
        assert!(plan.contains(&format!(" {index} ")), "{index} is not used:\n{plan}");
    }
    for index in never {
        assert!(!plan.contains(&format!(" {index} ")), "{index} is used:\n{plan}");
    }
}
