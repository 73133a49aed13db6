//! Replay: rebuild every projection from the log into a scratch schema and
//! compare it with the live tables, row for row.
//!
//! It runs in one REPEATABLE READ transaction, so the log and the live
//! tables it compares are of the same instant, and rolls back at the end:
//! the scratch schema never outlives the check.
//!
//! Speed without a second way of applying events: each page of the log goes
//! through `projection::apply_all`, which writes a run of consecutive events
//! of one batchable kind on distinct rows with one statement and applies
//! every other event alone through `projection::apply`, in log order; but
//! allocation replacements naming their bumps, the bulk of a log, are
//! folded in memory and written once per consumer by `COPY`
//! (`projection::staging`). A second connection, in the same snapshot,
//! reads the next pages meanwhile, the server reading one while the last is
//! decoded; memory stays within a few pages and the folded consumers. The
//! scratch tables are unlogged (they are rolled back anyway) and carry only
//! the indexes that applying events looks rows up by; those of `consumers`
//! and `allocations` are built only once something other than a folded
//! replacement reads them.

use std::time::{Duration, Instant};

use berth_core::{Error, Event};
use deadpool_postgres::Transaction;
use serde::Serialize;
use tokio::sync::mpsc::Sender;

use crate::projection::staging::{self, Staging};
use crate::projection::{SUMS, TABLES};
use crate::{Store, StoreError};

const SCRATCH: &str = "berth_replay";

/// Rules the live tables keep without a constraint enforcing them (for the
/// claim path's speed), each as a query of the rows that break it; besides
/// these, every sum (projection::SUMS) must be what its allocations give.
const CONSISTENCY: &[(&str, &str)] = &[(
    "allocations naming a missing provider, consumer or class",
    // Outer joins, not NOT EXISTS: OR-ed subqueries probe per row; joins hash.
    "SELECT 1 FROM {live}.allocations a
         LEFT JOIN {live}.providers p ON p.uuid = a.provider_uuid
         LEFT JOIN {live}.consumers c ON c.uuid = a.consumer_uuid
         LEFT JOIN {live}.resource_classes r ON r.name = a.resource_class
         WHERE p.uuid IS NULL OR c.uuid IS NULL OR r.name IS NULL",
)];
/// Plain btrees of tables that grow by every claim which applying events
/// never looks rows up by (consumers are written and deleted by their uuid
/// only): a replay of a million claims would maintain them a million times
/// for no lookup. Left out of the scratch tables; the comparison scans.
const NOT_LOOKED_UP: &[&str] = &["consumers_project_user", "consumers_type"];
/// The tables whose indexes wait for the first read of staged rows
/// (`projection::staging`).
const INDEXED_LATER: &[&str] = &["consumers", "allocations"];
/// The replay transaction's `work_mem`: a hash of a million consumers' keys
/// fits (the server's default, 4 MB, spills the merge to disk in batches).
const WORK_MEM: &str = "128MB";
/// Events read and applied at a time: long runs for `apply_all`, a few MB.
const PAGE: i64 = 10_000;

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
    /// Of the events, the allocation replacements folded in memory, and
    /// how many writes of them that took (`projection::staging`).
    pub staged: u64,
    pub merges: u64,
    /// Whether the open-ended sums were written from what the merges kept
    /// in memory (they alone wrote the allocations), not by a scan.
    pub sums_kept: bool,
    /// Rebuilding the projections: reading and applying the log, the sums.
    pub elapsed: Duration,
    /// Comparing them with the live tables and the consistency checks.
    pub compared: Duration,
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
        self.replay_verify_holding(staging::HELD).await
    }

    /// [`Store::replay_verify`], folding at most `consumers` replaced
    /// consumers in memory between merges (`projection::staging`).
    pub async fn replay_verify_holding(&self, consumers: usize) -> Result<ReplayReport, Error> {
        let mut client = self.client().await?.unbounded();
        let result: Result<ReplayReport, StoreError> = async {
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .start()
                .await?;
            let (live, later) = scratch(&tx).await?;
            let started = Instant::now();
            let mut staging = Staging::new(later, consumers);
            let events = self.apply_log(&tx, &mut staging).await?;
            let summing = Instant::now();
            staging.write_sums(&tx).await?;
            let summed_ms = summing.elapsed().as_millis();
            let elapsed = started.elapsed();
            // The comparisons read whole tables: the planner's own choices.
            tx.batch_execute("RESET plan_cache_mode; RESET enable_seqscan").await?;
            let mut differences = compare(&tx, &live).await?;
            let inconsistent = inconsistencies(&tx, &live, &differences).await?;
            differences.extend(inconsistent);
            let compared = started.elapsed().saturating_sub(elapsed);
            tracing::info!(
                events,
                rebuilt_ms = elapsed.as_millis(),
                summed_ms,
                compared_ms = compared.as_millis(),
                "replayed"
            );
            tx.rollback().await?;
            let (staged, merges, sums_kept) = (staging.staged, staging.merges, staging.sums_kept());
            Ok(ReplayReport { events, staged, merges, sums_kept, elapsed, compared, differences })
        }
        .await;
        Ok(result?)
    }
}

/// Makes the scratch schema, empty but for the standard vocabulary, and
/// points the projection tables at it; answers the live schema, and the
/// definitions of the indexes of [`INDEXED_LATER`], not yet built.
async fn scratch(tx: &Transaction<'_>) -> Result<(String, Vec<String>), StoreError> {
    let live: String = tx.query_one("SELECT current_schema() AS live", &[]).await?.get("live");
    tx.batch_execute(&format!("DROP SCHEMA IF EXISTS {SCRATCH} CASCADE; CREATE SCHEMA {SCRATCH};")).await?;
    for t in TABLES {
        tx.batch_execute(&format!(
            "CREATE UNLOGGED TABLE {SCRATCH}.{t} (LIKE {live}.{t} INCLUDING ALL EXCLUDING INDEXES)"
        ))
        .await?;
    }
    // Of the live indexes, the unique ones (ON CONFLICT infers them; rows are
    // looked up by these keys) and plain btrees on columns (the other
    // lookups). GiST, partial and expression indexes serve queries, not
    // replay, and every insert would pay for them; so would the btrees of
    // NOT_LOOKED_UP.
    let tables: Vec<&str> = TABLES.to_vec();
    let unused: Vec<&str> = NOT_LOOKED_UP.to_vec();
    let indexes = tx
        .query(
            "SELECT pg_get_indexdef(i.indexrelid) AS definition, t.relname::text AS table_name FROM pg_index i
                 JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
                 JOIN pg_class x ON x.oid = i.indexrelid JOIN pg_am am ON am.oid = x.relam
             WHERE n.nspname = $1 AND t.relname = ANY($2)
               AND (i.indisunique OR (am.amname = 'btree' AND i.indpred IS NULL AND i.indexprs IS NULL))
               AND x.relname <> ALL($3)",
            &[&live, &tables, &unused],
        )
        .await?;
    let mut later = Vec::new();
    for index in indexes {
        let (definition, table): (String, String) = (index.get("definition"), index.get("table_name"));
        let definition = definition.replacen(&format!(" ON {live}."), &format!(" ON {SCRATCH}."), 1);
        if INDEXED_LATER.contains(&table.as_str()) {
            later.push(definition);
        } else {
            tx.batch_execute(&definition).await?;
        }
    }
    tx.batch_execute(&staging::CREATE.replace("{scratch}", SCRATCH)).await?;
    // The standard vocabulary is seeded by migrations, not by events.
    for t in ["resource_classes", "traits"] {
        tx.batch_execute(&format!("INSERT INTO {SCRATCH}.{t} SELECT * FROM {live}.{t} WHERE standard")).await?;
    }
    // The manager's state starts as its migration seeds it: running.
    tx.batch_execute(&format!("INSERT INTO {SCRATCH}.manager_state DEFAULT VALUES")).await?;
    // Projection tables resolve to the scratch copies; the log to the live one.
    // The sums are rebuilt at the end (projection::SUMS).
    tx.batch_execute(&format!("SET LOCAL search_path TO {SCRATCH}, {live}; SET LOCAL berth.replaying = 'on'")).await?;
    // The merge of the staged replacements, the sums and the comparison
    // hash a million rows: in memory, not in batches spilled to disk.
    tx.batch_execute(&format!("SET LOCAL work_mem = '{WORK_MEM}'")).await?;
    // The scratch tables start empty and grow by every event: plans
    // made at the start must keep to the indexes (see sql::GENERIC_PLANS).
    tx.query(crate::sql::GENERIC_PLANS, &[]).await?;
    Ok((live, later))
}

impl Store {
    /// Applies every event of the log, in position order, a page at a time;
    /// answers how many. The pages come from [`read_log`], at most two ahead.
    async fn apply_log(&self, tx: &Transaction<'_>, staging: &mut Staging) -> Result<u64, StoreError> {
        let snapshot: String = tx.query_one("SELECT pg_export_snapshot() AS snapshot", &[]).await?.get("snapshot");
        let (sender, mut pages) = tokio::sync::mpsc::channel(2);
        let reader = tokio::spawn(read_log(self.config.as_ref().clone(), snapshot, sender));
        // Where the time goes: applying pages, or waiting for the reader.
        let (mut events, mut applying, mut waiting) = (0u64, Duration::ZERO, Duration::ZERO);
        loop {
            let asked = Instant::now();
            let Some(page) = pages.recv().await else { break };
            let page: Vec<Event> = page?;
            let started = Instant::now();
            waiting = waiting.saturating_add(started.duration_since(asked));
            staging.apply_all(tx, &page.iter().collect::<Vec<&Event>>()).await?;
            applying = applying.saturating_add(started.elapsed());
            events += page.len() as u64;
        }
        reader.await.map_err(|e| Error::internal(format!("the log reader failed: {e}")))?;
        let merging = Instant::now();
        staging.finish(tx).await?;
        tracing::info!(
            events,
            applying_ms = applying.as_millis(),
            waiting_ms = waiting.as_millis(),
            merged_ms = merging.elapsed().as_millis(),
            staged = staging.staged,
            merges = staging.merges,
            "log applied"
        );
        Ok(events)
    }
}

/// Reads the log in position order, in the exporting transaction's
/// `snapshot`, on a connection of its own, and sends it page by page,
/// decoded; a failure is sent as the last page.
async fn read_log(config: crate::Database, snapshot: String, pages: Sender<Result<Vec<Event>, StoreError>>) {
    let read = async {
        let (mut client, connection) = config.connect().await?;
        tokio::spawn(connection);
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        tx.batch_execute(&format!("SET TRANSACTION SNAPSHOT '{snapshot}'")).await?;
        let page = tx
            .prepare(
                "SELECT position, type, data::text AS data FROM log_events WHERE position > $1 ORDER BY position LIMIT $2",
            )
            .await?;
        let mut rows = tx.query(&page, &[&0i64, &PAGE]).await?;
        loop {
            let Some(last) = rows.last() else {
                return Ok(());
            };
            let after: i64 = last.get("position");
            // The server reads the next page while this one is decoded: on
            // its own, each waits for the other half the time.
            let decoding = tokio::task::spawn_blocking(move || {
                rows.iter()
                    .map(|r| decode(r.get("position"), r.get("type"), r.get("data")))
                    .collect::<Result<Vec<Event>, _>>()
            });
            let next = tx.query(&page, &[&after, &PAGE]).await;
            let events = decoding.await.map_err(|e| Error::internal(format!("decoding the log failed: {e}")))??;
            if pages.send(Ok(events)).await.is_err() {
                return Ok(()); // the replay stopped
            }
            rows = next?;
        }
    };
    if let Err(e) = read.await {
        let _ = pages.send(Err(e)).await;
    }
}

/// One event from its log columns, parsed straight from the text (the
/// adjacently tagged form [`Event::from_parts`] builds).
fn decode(position: i64, ty: &str, data: &str) -> Result<Event, StoreError> {
    serde_json::from_str(&format!(r#"{{"type":{},"data":{data}}}"#, serde_json::Value::from(ty))).map_err(|err| {
        StoreError::from(Error::internal(format!("log position {position}: cannot read {ty} event: {err}")))
    })
}

/// Every projection table whose rows differ between live and replayed. A
/// table is first fingerprinted on both sides, one pass each: its row count
/// and the sum of a 64-bit hash of every row (`hash_record_extended`, the
/// hash of each column's value combined), which any row altered, added or
/// deleted changes but for a one in 2^64 coincidence. Only a table whose
/// fingerprints differ is then grouped row by row, each distinct row counted
/// on either side: grouping millions of whole rows costs far more than
/// hashing them (it sorts or spills), and a clean replay needs none of it.
async fn compare(tx: &Transaction<'_>, live: &str) -> Result<Vec<TableDifference>, StoreError> {
    let mut differences = Vec::new();
    for t in TABLES {
        // A sum keeps rows at zero where a write emptied them, and a
        // project's in stripes; a rebuild has one row per key, none at zero.
        let from = |schema: &str| match SUMS.iter().find(|s| s.table == *t) {
            Some(sum) => format!("({})", sum.totals(schema)),
            None => format!("{schema}.{t}"),
        };
        let fingerprint = |schema: &str| {
            format!("SELECT count(*), coalesce(sum(hash_record_extended(r, 0)::numeric), 0) FROM {} r", from(schema))
        };
        let same = format!(
            "SELECT l.n = s.n AND l.h = s.h AS same FROM ({}) l(n, h), ({}) s(n, h)",
            fingerprint(live),
            fingerprint(SCRATCH)
        );
        if tx.query_one(&same, &[]).await?.get::<_, bool>("same") {
            continue;
        }
        let rows = |schema: &str| format!("SELECT ROW(r.*) AS r, {} AS live FROM {} r", schema == live, from(schema));
        let counted = format!(
            "SELECT coalesce(sum(greatest(l - s, 0)), 0)::int8 AS only_live,
                    coalesce(sum(greatest(s - l, 0)), 0)::int8 AS only_replayed
             FROM (SELECT count(*) FILTER (WHERE live) AS l, count(*) FILTER (WHERE NOT live) AS s
                   FROM ({} UNION ALL {}) u GROUP BY r) g",
            rows(live),
            rows(SCRATCH)
        );
        let row = tx.query_one(&counted, &[]).await?;
        let (only_live, only_replayed): (i64, i64) = (row.get("only_live"), row.get("only_replayed"));
        if only_live != 0 || only_replayed != 0 {
            differences.push(TableDifference { table: t.to_string(), only_live, only_replayed });
        }
    }
    Ok(differences)
}

/// What the schema does not enforce, checked on the live tables. A sum is
/// checked against the live allocations only where `compared` found its
/// table or the allocations different: where both match the replayed ones,
/// the live sum is the replayed one, which is by construction the sum of the
/// replayed allocations, which are the live ones.
async fn inconsistencies(
    tx: &Transaction<'_>,
    live: &str,
    compared: &[TableDifference],
) -> Result<Vec<TableDifference>, StoreError> {
    let mut checks: Vec<(String, String)> =
        CONSISTENCY.iter().map(|(name, sql)| (name.to_string(), sql.replace("{live}", live))).collect();
    let differs = |table: &str| compared.iter().any(|d| d.table == table);
    for sum in SUMS.iter().filter(|s| differs(s.table) || differs("allocations")) {
        let (table, summed, kept) = (sum.table, sum.query(live), sum.totals(live));
        checks.push((
            format!("{table} differing from the sum of open-ended allocations"),
            format!("({kept} EXCEPT {summed}) UNION ALL ({summed} EXCEPT {kept})"),
        ));
    }
    let mut differences = Vec::new();
    for (name, violations) in checks {
        let n: i64 = tx.query_one(&format!("SELECT count(*) AS n FROM ({violations}) v"), &[]).await?.get("n");
        if n != 0 {
            differences.push(TableDifference { table: name, only_live: n, only_replayed: 0 });
        }
    }
    Ok(differences)
}
