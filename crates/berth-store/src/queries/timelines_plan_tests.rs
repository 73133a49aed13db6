//! The timelines' reads run on generic plans in a lease creation
//! (`sql::GENERIC_PLANS`), which may be made while the tables are empty:
//! each must still look its rows up by key, the holds through the timeline
//! index, one provider at a time.

use crate::plan_checks::{check, generic_plan};
use crate::testing::TestDatabase;

#[tokio::test]
async fn the_reads_look_rows_up_by_key_from_the_start() {
    let db = TestDatabase::new().await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    for (sql, params) in
        [(super::HOSTS, 2), (super::INVENTORIES, 2), (super::EVERY_HOST, 2), (super::EVERY_HOST_INVENTORIES, 2)]
    {
        check(&generic_plan(&client, sql, params).await, &[], &["allocations_timeline"]);
    }
    check(&generic_plan(&client, super::HOLDS, 6).await, &["allocations_timeline"], &[]);
    check(
        &generic_plan(&client, super::GAPS, 5).await,
        &["allocations_provider_upper", "allocations_provider_lower"],
        &[],
    );
}
