//! Replay's way with allocation replacements: staged, then merged.
//!
//! Applied one by one (or a run at a time, [`super::apply_all`]), every
//! replacement deletes the consumer's earlier allocations, upserts its row
//! and inserts its new allocations: for a million events, millions of index
//! insertions and probes and speculative insertions, 20 to 40 µs a row.
//! Replay instead appends each replacement naming its bumps, as it comes, to
//! two staging tables that carry no index at all (the consumer's columns and
//! its allocations, by the event's sequence number), and merges them into
//! `consumers` and `allocations` set-wise ([`MERGE_INTO_EMPTY`],
//! [`MERGE`]): each consumer as its replacements since the last that emptied
//! it leave it (the last one's allocations, project, user, type and instant;
//! as many generations as replacements; created at the first). The
//! providers' generations are bumped as each page is staged, in log order.
//!
//! Until something else must read or write consumers or allocations
//! ([`touches_allocations`]), `consumers` and `allocations` stay empty and
//! unindexed: the first such event merges the staged rows into them, and
//! only then are their indexes built, once, in bulk; from there, staged rows
//! are merged before every such event and at the end.

use berth_core::Event;

use super::placement::AllocationColumns;
use crate::client::GenericClient;
use crate::{sql, StoreError};

type At = chrono::DateTime<chrono::Utc>;

/// The staging tables, in the scratch schema `{scratch}`: no index, no
/// constraint; rolled back with the replay.
pub(crate) const CREATE: &str = "
    CREATE UNLOGGED TABLE {scratch}.staged_consumers (
        seq int8, uuid uuid, project_id text, user_id text, consumer_type text, at timestamptz, emptied bool);
    CREATE UNLOGGED TABLE {scratch}.staged_allocations (
        seq int8, provider_uuid uuid, resource_class text, used int8, during tstzrange, ordinal int4)";

/// A page's replacements appended to the staging tables, and the providers
/// they bump given their new generations (as `WRITE_ALLOCATIONS` does).
const STAGE: &str = "
    WITH c AS (INSERT INTO staged_consumers (seq, uuid, project_id, user_id, consumer_type, at, emptied)
                   SELECT * FROM unnest($1::int8[], $2::uuid[], $3::text[], $4::text[], $5::text[],
                                        $6::timestamptz[], $7::bool[])),
         a AS (INSERT INTO staged_allocations (seq, provider_uuid, resource_class, used, during, ordinal)
                   SELECT s, p, rc, u, tstzrange(st, e, '[)'), o
                   FROM unnest($8::int8[], $9::uuid[], $10::text[], $11::int8[], $12::timestamptz[],
                               $13::timestamptz[], $17::int4[]) AS x(s, p, rc, u, st, e, o)),
         b AS MATERIALIZED (SELECT * FROM unnest($14::uuid[], $15::int8[], $16::timestamptz[]) AS b(uuid, n, at))
    UPDATE providers p SET generation = p.generation + b.n, updated_at = greatest(p.updated_at, b.at)
    FROM b WHERE p.uuid = ANY($14) AND p.uuid = b.uuid";

/// The staged consumers' earlier rows gone before a [`MERGE`]: every
/// allocation (a replacement replaces them all), and the consumer row of
/// any that a staged replacement emptied (the next one made it anew).
const DROP_REPLACED: &str = "
    DELETE FROM allocations a USING (SELECT DISTINCT uuid FROM staged_consumers) s WHERE a.consumer_uuid = s.uuid;
    DELETE FROM consumers c USING (SELECT DISTINCT uuid FROM staged_consumers WHERE emptied) s WHERE c.uuid = s.uuid";

/// The merge of the staged replacements: per consumer, `last` is its last
/// replacement and `cut` its last emptying one; the replacements after the
/// cut (none where the last emptied it: no row) each made the row or added
/// a generation, the first made it. `{on_conflict}` says what a consumer
/// row already there (from an earlier merge) becomes.
macro_rules! merge {
    ($on_conflict:literal) => {
        concat!(
            "WITH e AS (SELECT uuid, max(seq) AS last, max(seq) FILTER (WHERE emptied) AS cut
                        FROM staged_consumers GROUP BY uuid),
                  s AS (SELECT g.uuid, count(*) AS writes, min(g.seq) AS first, e.last
                        FROM staged_consumers g JOIN e ON e.uuid = g.uuid
                        WHERE g.seq > coalesce(e.cut, -1) GROUP BY g.uuid, e.last),
                  l AS MATERIALIZED (
                        SELECT k.seq, k.uuid, k.project_id, k.user_id, k.consumer_type, k.at, s.writes, f.at AS created
                        FROM s JOIN staged_consumers k ON k.seq = s.last JOIN staged_consumers f ON f.seq = s.first),
                  made AS (
                        INSERT INTO consumers AS o (uuid, project_id, user_id, consumer_type, generation, created_at,
                                                    updated_at)
                        SELECT uuid, project_id, user_id, consumer_type, writes, created, at FROM l ",
            $on_conflict,
            ")
             INSERT INTO allocations (consumer_uuid, provider_uuid, resource_class, used, during, project_id, user_id,
                                      ordinal)
             SELECT l.uuid, a.provider_uuid, a.resource_class, a.used, a.during, l.project_id, l.user_id, a.ordinal
             FROM staged_allocations a JOIN l ON l.seq = a.seq;
             TRUNCATE staged_consumers, staged_allocations"
        )
    };
}

/// [`merge!`] into empty, unindexed tables: plain inserts.
const MERGE_INTO_EMPTY: &str = merge!("");

/// [`merge!`] after [`DROP_REPLACED`]: a consumer row still there had no
/// staged emptying, so every staged replacement added a generation to it.
const MERGE: &str = merge!(
    "ON CONFLICT (uuid) DO UPDATE SET project_id = excluded.project_id, user_id = excluded.user_id,
         consumer_type = excluded.consumer_type, generation = o.generation + excluded.generation,
         updated_at = excluded.updated_at"
);

/// Whether applying `event` reads or writes `consumers` or `allocations`
/// (see `placement::apply`): the staged replacements must be merged first.
/// No wildcard arm: a new event type must say.
fn touches_allocations(event: &Event) -> bool {
    match event {
        Event::AllocationsReplaced { .. } | Event::ResourceClassRenamed { .. } => true,
        Event::ResourceClassCreated { .. }
        | Event::ResourceClassDeleted { .. }
        | Event::TraitCreated { .. }
        | Event::TraitDeleted { .. }
        | Event::ProviderCreated { .. }
        | Event::ProviderUpdated { .. }
        | Event::ProviderDeleted { .. }
        | Event::InventoriesReplaced { .. }
        | Event::ProviderTraitsReplaced { .. }
        | Event::ProviderAggregatesReplaced { .. }
        | Event::LeaseCreated { .. }
        | Event::LeaseUpdated { .. }
        | Event::LeaseDeleted { .. }
        | Event::LeaseStatusChanged { .. }
        | Event::ReservationStatusChanged { .. }
        | Event::LeaseEventChanged { .. }
        | Event::LeaseRecovered { .. }
        | Event::HostEnrolled { .. }
        | Event::HostUpdated { .. }
        | Event::HostRemoved { .. }
        | Event::HostPropertyChanged { .. }
        | Event::ReservationDrawn { .. }
        | Event::QuotaSet { .. }
        | Event::QuotaUnset { .. }
        | Event::QuotaOverLimit { .. }
        | Event::RequestKeyed { .. }
        | Event::HostDisabled { .. }
        | Event::ReservationHealed { .. }
        | Event::ReservationUnhealed { .. }
        | Event::HealHookFinished { .. }
        | Event::MaintenanceScheduled { .. }
        | Event::MaintenanceCancelled { .. }
        | Event::LeaseEventClaimed { .. }
        | Event::LeaseEventClaimRenewed { .. }
        | Event::LeaseEventRetrying { .. }
        | Event::LeaseEventFinished { .. }
        | Event::HostHeld { .. }
        | Event::HostHoldReleased { .. }
        | Event::LeaseEventRetried { .. }
        | Event::LeaseEventCancelled { .. }
        | Event::LeaseEventFired { .. }
        | Event::ManagerPaused { .. }
        | Event::ManagerResumed { .. } => false,
    }
}

/// The providers a replacement that can be staged bumps: one naming them.
fn stageable(event: &Event) -> Option<&[uuid::Uuid]> {
    match event {
        Event::AllocationsReplaced { providers_bumped: Some(bumped), .. } => Some(bumped),
        _ => None,
    }
}

/// Where replay stands with the staging tables.
pub(crate) struct Staging {
    /// The indexes of `consumers` and `allocations`, built at the first
    /// merge that something else will read after.
    indexes: Vec<String>,
    indexed: bool,
    /// Whether rows are staged that no merge has taken yet.
    pending: bool,
    /// The sequence number of the next replacement staged.
    seq: i64,
    /// How many replacements were staged, and how many merges made.
    pub(crate) staged: u64,
    pub(crate) merges: u64,
}

impl Staging {
    /// With `consumers` and `allocations` empty, and without `indexes`, the
    /// definitions of the indexes they are to have.
    pub(crate) fn new(indexes: Vec<String>) -> Staging {
        Staging { indexes, indexed: false, pending: false, seq: 0, staged: 0, merges: 0 }
    }

    /// Applies `events` in order, as [`super::apply_all`] would.
    pub(crate) async fn apply_all(&mut self, c: &impl GenericClient, events: &[&Event]) -> Result<(), StoreError> {
        let mut i = 0;
        while i < events.len() {
            let staging = stageable(events[i]).is_some();
            let end =
                events[i..].iter().position(|e| stageable(e).is_some() != staging).map_or(events.len(), |n| i + n);
            let run = &events[i..end];
            if staging {
                self.stage(c, run).await?;
            } else {
                if run.iter().any(|e| touches_allocations(e)) {
                    self.merge_for_reading(c).await?;
                }
                super::apply_all(c, run).await?;
            }
            i = end;
        }
        Ok(())
    }

    /// Merges what is staged, at the end of the log: the tables are then
    /// complete (and indexed only if something read them before).
    pub(crate) async fn finish(&mut self, c: &impl GenericClient) -> Result<(), StoreError> {
        if self.indexed {
            self.merge(c, &[DROP_REPLACED, MERGE]).await
        } else {
            self.merge(c, &[MERGE_INTO_EMPTY]).await
        }
    }

    /// Merges what is staged so that an event can read and write
    /// `consumers` and `allocations` as applying one by one leaves them:
    /// the first time into the empty tables, whose indexes are then built.
    async fn merge_for_reading(&mut self, c: &impl GenericClient) -> Result<(), StoreError> {
        if self.indexed {
            return self.merge(c, &[DROP_REPLACED, MERGE]).await;
        }
        self.merge(c, &[MERGE_INTO_EMPTY]).await?;
        c.batch_execute(&self.indexes.join(";")).await?;
        self.indexed = true;
        Ok(())
    }

    /// Runs `statements` (a merge) if anything is staged.
    async fn merge(&mut self, c: &impl GenericClient, statements: &[&str]) -> Result<(), StoreError> {
        if !self.pending {
            return Ok(());
        }
        // Set-wise: scans and hash joins, whatever replay's lookups prefer.
        let statements = statements.join(";");
        c.batch_execute(&format!("SET LOCAL enable_seqscan = on; {statements}; SET LOCAL enable_seqscan = off"))
            .await?;
        (self.pending, self.merges) = (false, self.merges + 1);
        Ok(())
    }

    /// Appends a run of replacements naming their bumps to the staging
    /// tables, and bumps those providers.
    async fn stage(&mut self, c: &impl GenericClient, run: &[&Event]) -> Result<(), StoreError> {
        let mut cols = Columns::default();
        for e in run {
            cols.push(self.seq, e);
            self.seq += 1;
        }
        let (seqs, cols) = (&cols.seqs, &cols.rows);
        let bumped: Vec<uuid::Uuid> = cols.bumps.keys().copied().collect();
        let counts: Vec<i64> = cols.bumps.values().map(|b| b.0).collect();
        let bumped_at: Vec<At> = cols.bumps.values().map(|b| b.1).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 17] = [
            seqs,
            &cols.consumers,
            &cols.projects,
            &cols.users,
            &cols.types,
            &cols.ats,
            &cols.emptied,
            &cols.a_key,
            &cols.a_provider,
            &cols.a_class,
            &cols.a_used,
            &cols.a_start,
            &cols.a_end,
            &bumped,
            &counts,
            &bumped_at,
            &cols.a_ordinal,
        ];
        sql::execute(c, STAGE, &params).await?;
        self.staged += run.len() as u64;
        self.pending = true;
        Ok(())
    }
}

/// Replacements as the columns of [`STAGE`]: each one's place in the log,
/// and its rows as the live write builds them, its allocations keyed by
/// that place.
#[derive(Default)]
struct Columns<'a> {
    seqs: Vec<i64>,
    rows: AllocationColumns<'a, i64>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, seq: i64, e: &'a Event) {
        let Event::AllocationsReplaced { providers_bumped: Some(bumped), .. } = e else {
            unreachable!("only replacements naming their bumps are staged");
        };
        self.seqs.push(seq);
        self.rows.push(e, bumped, seq);
    }
}
