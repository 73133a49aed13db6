//! The claim path's statements run on generic plans (`sql::GENERIC_PLANS`),
//! often made while the tables are nearly empty, where every usable index
//! costs the same as any other; a plan picked then stays for the life of the
//! connection. These tests make those plans on a freshly migrated, empty
//! database and check that each statement reads from the indexes meant for
//! it, and scans no table.

use crate::plan_checks::{check, generic_plan};
use crate::testing::TestDatabase;

#[tokio::test]
async fn claim_statements_read_from_their_own_indexes_from_the_start() {
    let db = TestDatabase::new().await;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    // Everyone else's holds on a provider: its bounded holds, its open-ended
    // ones from the window on, its open-ended sum; never a project's rows, nor
    // the timeline index (which holds every open-ended hold ever made).
    let plan = generic_plan(&client, super::read::READ_OTHERS, 5).await;
    check(
        &plan,
        &["allocations_bounded", "allocations_open_start", "provider_open_usage_pkey"],
        &["allocations_timeline", "allocations_project_bounded", "allocations_project_open_start"],
    );
    // A project's usage: the same, on the project's side.
    let plan = generic_plan(&client, crate::quota::USAGE, 6).await;
    check(
        &plan,
        &[
            "allocations_project_bounded",
            "allocations_project_open_start",
            "project_open_usage_pkey",
            "allocations_consumer",
        ],
        &["allocations_timeline", "allocations_bounded", "allocations_open_start", "allocations_provider_upper"],
    );
    for (sql, params) in [
        (crate::lock::GUARD_INSERT, 1),
        (crate::lock::GUARD_LOCK, 1),
        (crate::lock::CONSUMERS_HOLDING, 1),
        (super::read::HOLDS_DRAWS, 1),
        (crate::lock::PROVIDERS_WITH_INVENTORIES, 2),
        (super::read::KNOWN_CLASSES, 1),
        (crate::quota::LIMITS, 2),
        // A claim that draws from a reservation looks its draw up in the same
        // transaction, after the batch's read has set the generic plans.
        (super::draw::DRAWS_HELD, 1),
        (super::draw::SLOTS_OF, 2),
        (super::draw::SLOT_LEASES, 1),
        (super::draw::SLOT_HOLDS, 1),
        (super::draw::LEASE_STATUS, 1),
    ] {
        check(&generic_plan(&client, sql, params).await, &[], &["allocations_timeline"]);
    }
}
