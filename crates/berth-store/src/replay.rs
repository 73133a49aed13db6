//! Replay: rebuild every projection from the log into a scratch schema and
//! compare it with the live tables, row for row.
//!
//! It runs in one REPEATABLE READ transaction, so the log and the live
//! tables it compares are of the same instant, and rolls back at the end:
//! the scratch schema never outlives the check.

use std::time::{Duration, Instant};

use berth_core::Error;
use deadpool_postgres::Transaction;
use serde::Serialize;

use crate::projection::{SUMS, TABLES};
use crate::{log, Store, StoreError};

const SCRATCH: &str = "berth_replay";

/// Rules the live tables keep without a constraint enforcing them (for the
/// claim path's speed), each as a query of the rows that break it; besides
/// these, every sum (projection::SUMS) must be what its allocations give.
const CONSISTENCY: &[(&str, &str)] = &[(
    "allocations naming a missing provider, consumer or class",
    "SELECT 1 FROM {live}.allocations a
         WHERE NOT EXISTS (SELECT 1 FROM {live}.providers p WHERE p.uuid = a.provider_uuid)
            OR NOT EXISTS (SELECT 1 FROM {live}.consumers c WHERE c.uuid = a.consumer_uuid)
            OR NOT EXISTS (SELECT 1 FROM {live}.resource_classes r WHERE r.name = a.resource_class)",
)];
const PAGE: i64 = 5_000;

#[derive(Debug, Clone, Serialize)]
pub struct TableDifference {
    pub table: String,
    /// Rows live has that replay does not give.
    pub only_live: i64,
    /// Rows replay gives that live lacks.
    pub only_replayed: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub events: u64,
    pub elapsed: Duration,
    pub differences: Vec<TableDifference>,
}

impl ReplayReport {
    pub fn is_clean(&self) -> bool {
        self.differences.is_empty()
    }
}

impl Store {
    /// Replays the whole log and reports every table that differs.
    pub async fn replay_verify(&self) -> Result<ReplayReport, Error> {
        let mut client = self.client().await?;
        let result: Result<ReplayReport, StoreError> = async {
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .start()
                .await?;
            let live = scratch(&tx).await?;
            let started = Instant::now();
            let events = apply_log(&tx).await?;
            for sum in SUMS {
                let (table, keys) = (sum.table, sum.keys);
                tx.batch_execute(&format!("INSERT INTO {SCRATCH}.{table} ({keys}, used) {}", sum.query(SCRATCH)))
                    .await?;
            }
            let elapsed = started.elapsed();
            let mut differences = compare(&tx, &live).await?;
            differences.extend(inconsistencies(&tx, &live).await?);
            tx.rollback().await?;
            Ok(ReplayReport { events, elapsed, differences })
        }
        .await;
        Ok(result?)
    }
}

/// Makes the scratch schema, empty but for the standard vocabulary, and
/// points the projection tables at it; answers the live schema.
async fn scratch(tx: &Transaction<'_>) -> Result<String, StoreError> {
    let live: String = tx.query_one("SELECT current_schema()", &[]).await?.get(0);
    tx.batch_execute(&format!("DROP SCHEMA IF EXISTS {SCRATCH} CASCADE; CREATE SCHEMA {SCRATCH};")).await?;
    for t in TABLES {
        tx.batch_execute(&format!("CREATE TABLE {SCRATCH}.{t} (LIKE {live}.{t} INCLUDING ALL)")).await?;
    }
    // The standard vocabulary is seeded by migrations, not by events.
    for t in ["resource_classes", "traits"] {
        tx.batch_execute(&format!("INSERT INTO {SCRATCH}.{t} SELECT * FROM {live}.{t} WHERE standard")).await?;
    }
    // The manager's state starts as its migration seeds it: running.
    tx.batch_execute(&format!("INSERT INTO {SCRATCH}.manager_state DEFAULT VALUES")).await?;
    // Projection tables resolve to the scratch copies; the log to the live one.
    // The sums are rebuilt at the end (projection::SUMS).
    tx.batch_execute(&format!("SET LOCAL search_path TO {SCRATCH}, {live}; SET LOCAL berth.replaying = 'on'")).await?;
    // The scratch tables start empty and grow by every event: plans
    // made at the start must keep to the indexes (see sql::GENERIC_PLANS).
    tx.query(crate::sql::GENERIC_PLANS, &[]).await?;
    Ok(live)
}

/// Applies every event of the log, in position order; answers how many.
async fn apply_log(tx: &Transaction<'_>) -> Result<u64, StoreError> {
    let mut events = 0u64;
    let mut after = 0i64;
    loop {
        let page = log::read_by_position(&**tx, after, PAGE).await?;
        if page.is_empty() {
            return Ok(events);
        }
        for e in &page {
            let event = e.event().map_err(|err| {
                Error::internal(format!("log position {}: cannot read {} event: {err}", e.position, e.event_type))
            })?;
            crate::projection::apply(tx, &event).await?;
            events += 1;
        }
        after = page.last().map(|e| e.position).unwrap_or(after);
    }
}

/// Every projection table whose rows differ between live and replayed.
async fn compare(tx: &Transaction<'_>, live: &str) -> Result<Vec<TableDifference>, StoreError> {
    let mut differences = Vec::new();
    for t in TABLES {
        // A sum keeps rows at zero where a write emptied them; a rebuild has none.
        let rows = |schema: &str| {
            if SUMS.iter().any(|s| s.table == *t) {
                format!("SELECT * FROM {schema}.{t} WHERE used <> 0")
            } else {
                format!("SELECT * FROM {schema}.{t}")
            }
        };
        let (live_rows, scratch_rows) = (rows(live), rows(SCRATCH));
        let count = |sql: String| async move { Ok::<i64, StoreError>(tx.query_one(&sql, &[]).await?.get(0)) };
        let only_live = count(format!("SELECT count(*) FROM ({live_rows} EXCEPT ALL {scratch_rows}) d")).await?;
        let only_replayed = count(format!("SELECT count(*) FROM ({scratch_rows} EXCEPT ALL {live_rows}) d")).await?;
        if only_live != 0 || only_replayed != 0 {
            differences.push(TableDifference { table: t.to_string(), only_live, only_replayed });
        }
    }
    Ok(differences)
}

/// What the schema does not enforce, checked on the live tables.
async fn inconsistencies(tx: &Transaction<'_>, live: &str) -> Result<Vec<TableDifference>, StoreError> {
    let mut checks: Vec<(String, String)> =
        CONSISTENCY.iter().map(|(name, sql)| (name.to_string(), sql.replace("{live}", live))).collect();
    for sum in SUMS {
        let (table, keys, summed) = (sum.table, sum.keys, sum.query(live));
        let kept = format!("SELECT {keys}, used FROM {live}.{table} WHERE used <> 0");
        checks.push((
            format!("{table} differing from the sum of open-ended allocations"),
            format!("({kept} EXCEPT {summed}) UNION ALL ({summed} EXCEPT {kept})"),
        ));
    }
    let mut differences = Vec::new();
    for (name, violations) in checks {
        let n: i64 = tx.query_one(&format!("SELECT count(*) FROM ({violations}) v"), &[]).await?.get(0);
        if n != 0 {
            differences.push(TableDifference { table: name, only_live: n, only_replayed: 0 });
        }
    }
    Ok(differences)
}
