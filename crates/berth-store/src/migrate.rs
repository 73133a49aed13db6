//! Schema migrations, embedded from `migrations/` and applied in order under
//! an advisory lock, so that several berthd starting at once migrate once.
//!
//! Rolling upgrades: while berthd are replaced one by one, the first new one
//! migrates and old ones still serve, and one may restart. A berthd facing a
//! schema ahead of what it knows starts without migrating when the schema
//! says binaries of its level may run on it (`berth_schema_compat`:
//! `oldest_reader`, raised by a release whose migrations take something
//! away, [`READERS_FROM`]), and refuses, saying which, when not.

use crate::{Store, StoreError};

mod embedded {
    refinery::embed_migrations!("../../migrations");
}

/// Advisory lock key held while migrating ("berthmig").
const MIGRATION_LOCK: i64 = 0x6265_7274_686d_6967;

/// The oldest migration a binary must know to run on the schema this one
/// leaves: its migrations so far only add (tables, columns with defaults,
/// indexes), so binaries from the first to carry the check on may serve
/// while a rolling upgrade goes on. A release that drops or renames what
/// an older binary uses raises it to its own last migration.
pub const READERS_FROM: i32 = 59;

/// The last migration this binary knows.
fn latest() -> i32 {
    embedded::migrations::runner().get_migrations().iter().map(|m| m.version() as i32).max().unwrap_or(0)
}

impl Store {
    /// Applies the migrations the database lacks; returns how many ran.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        // A migration (and waiting for another berthd's) may take longer
        // than the statement timeout and the deadline requests have.
        let mut client = self.client().await?.unbounded();
        client.batch_execute("SET statement_timeout = 0").await?;
        client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).await?;
        let result = match schema_ahead(&client).await {
            Ok(Some(ahead)) => ahead.may_run().map(|()| 0),
            Ok(None) => match embedded::migrations::runner()
                .set_migration_table_name("berth_schema_history")
                .run_async(&mut **client)
                .await
            {
                Ok(report) => client
                    .execute(
                        "UPDATE berth_schema_compat SET oldest_reader = greatest(oldest_reader, $1)",
                        &[&READERS_FROM],
                    )
                    .await
                    .map(|_| report.applied_migrations().len())
                    .map_err(StoreError::from),
                Err(e) => Err(StoreError::Pool(format!("migration failed: {e}"))),
            },
            Err(e) => Err(e),
        };
        client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await?;
        client.batch_execute("RESET statement_timeout").await?;
        result
    }

    /// Applies the migrations up to and including `version` (for tests of an
    /// upgrade over existing data); returns how many ran.
    #[cfg(feature = "testing")]
    pub async fn migrate_to(&self, version: u32) -> Result<usize, StoreError> {
        let mut client = self.client().await?.unbounded();
        let mut runner = embedded::migrations::runner().set_target(refinery::Target::Version(version));
        let report = runner
            .set_migration_table_name("berth_schema_history")
            .run_async(&mut **client)
            .await
            .map_err(|e| StoreError::Pool(format!("migration failed: {e}")))?;
        Ok(report.applied_migrations().len())
    }
}

/// A schema migrated past what this binary knows.
struct Ahead {
    applied: i32,
    oldest_reader: i32,
}

impl Ahead {
    /// Whether this binary may serve on it.
    fn may_run(&self) -> Result<(), StoreError> {
        let known = latest();
        if known >= self.oldest_reader {
            tracing::warn!(
                schema = self.applied,
                known,
                "the database's schema is ahead of this berthd (a rolling upgrade under way?): serving without migrating"
            );
            return Ok(());
        }
        Err(StoreError::Settings(format!(
            "the database's schema is at migration {}, which needs a berthd that knows migration {} or later; \
             this one knows up to {known}: upgrade it",
            self.applied, self.oldest_reader
        )))
    }
}

/// The schema's level and who may read it, when it is past this binary's.
async fn schema_ahead(client: &crate::conn::Checkout) -> Result<Option<Ahead>, StoreError> {
    let row = client
        .query_one(
            "SELECT (SELECT max(version) FROM berth_schema_history) AS applied,
                    (SELECT oldest_reader FROM berth_schema_compat) AS oldest_reader
             WHERE to_regclass('berth_schema_history') IS NOT NULL AND to_regclass('berth_schema_compat') IS NOT NULL
             UNION ALL SELECT NULL, NULL LIMIT 1",
            &[],
        )
        .await;
    // Before berth_schema_history exists, the query cannot even be planned.
    let row = match row {
        Ok(row) => row,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let (applied, oldest_reader): (Option<i32>, Option<i32>) = (row.get("applied"), row.get("oldest_reader"));
    Ok(match (applied, oldest_reader) {
        (Some(applied), Some(oldest_reader)) if applied > latest() => Some(Ahead { applied, oldest_reader }),
        _ => None,
    })
}

/// A fingerprint of the embedded migrations: names a migrated template
/// database so tests never use one made from other migrations.
pub fn fingerprint() -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for m in embedded::migrations::runner().get_migrations() {
        m.name().hash(&mut h);
        m.version().hash(&mut h);
        m.checksum().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDatabase;

    /// Marks the schema as migrated past this binary, to `applied`, readable
    /// by binaries from `oldest_reader` on: as a newer berthd leaves it.
    async fn newer_berthd_migrated(db: &TestDatabase, applied: i32, oldest_reader: i32) {
        let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        c.execute(
            "INSERT INTO berth_schema_history (version, name, applied_on, checksum) VALUES ($1, 'from_the_future', '', '0')",
            &[&applied],
        )
        .await
        .unwrap();
        c.execute("UPDATE berth_schema_compat SET oldest_reader = $1", &[&oldest_reader]).await.unwrap();
    }

    #[tokio::test]
    async fn an_older_berthd_serves_on_a_schema_ahead_only_where_the_schema_allows() {
        let db = TestDatabase::new().await;
        let store = db.store(2);
        // Migrated by this binary: nothing to do, and the schema admits it.
        assert_eq!(store.migrate().await.unwrap(), 0);
        let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        let reader: i32 =
            c.query_one("SELECT oldest_reader FROM berth_schema_compat", &[]).await.unwrap().get("oldest_reader");
        assert!(reader >= READERS_FROM && reader <= latest(), "{reader}");

        // A newer berthd added a migration this one lacks, readable by it.
        newer_berthd_migrated(&db, latest() + 1, latest()).await;
        assert_eq!(store.migrate().await.unwrap(), 0, "serves without migrating");
        // A newer one took something away: this one must not serve.
        c.execute("UPDATE berth_schema_compat SET oldest_reader = $1", &[&(latest() + 1)]).await.unwrap();
        let err = store.migrate().await.unwrap_err().to_string();
        assert!(err.contains(&format!("knows up to {}", latest())) && err.contains("upgrade"), "{err}");
    }
}
