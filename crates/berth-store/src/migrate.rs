//! Schema migrations, embedded from `migrations/` and applied in order under
//! an advisory lock, so that several berthd starting at once migrate once.

use crate::{Store, StoreError};

mod embedded {
    refinery::embed_migrations!("../../migrations");
}

/// Advisory lock key held while migrating ("berthmig").
const MIGRATION_LOCK: i64 = 0x6265_7274_686d_6967;

impl Store {
    /// Applies the migrations the database lacks; returns how many ran.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.client().await?;
        // A migration (and waiting for another berthd's) may take longer
        // than the statement timeout requests have.
        client.batch_execute("SET statement_timeout = 0").await?;
        client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).await?;
        let result = embedded::migrations::runner()
            .set_migration_table_name("berth_schema_history")
            .run_async(&mut **client)
            .await;
        client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await?;
        client.batch_execute("RESET statement_timeout").await?;
        let report = result.map_err(|e| StoreError::Pool(format!("migration failed: {e}")))?;
        Ok(report.applied_migrations().len())
    }

    /// Applies the migrations up to and including `version` (for tests of an
    /// upgrade over existing data); returns how many ran.
    #[cfg(feature = "testing")]
    pub async fn migrate_to(&self, version: u32) -> Result<usize, StoreError> {
        let mut client = self.client().await?;
        let mut runner = embedded::migrations::runner().set_target(refinery::Target::Version(version));
        let report = runner
            .set_migration_table_name("berth_schema_history")
            .run_async(&mut **client)
            .await
            .map_err(|e| StoreError::Pool(format!("migration failed: {e}")))?;
        Ok(report.applied_migrations().len())
    }
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
