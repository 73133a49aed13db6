//! Replay's way with allocation replacements: folded, then merged.
//!
//! Applied one by one (or a run at a time, [`super::apply_all`]), every
//! replacement deletes the consumer's earlier allocations, upserts its row
//! and inserts its new allocations: for a million events, millions of index
//! insertions and probes and speculative insertions, 20 to 40 µs a row.
//! Replay instead folds the replacements naming their bumps, as they come,
//! into memory ([`pending`]): each consumer as its replacements since the
//! last merge leave it (its last replacement's allocations, project, user,
//! type and instant; a generation per replacement since the last that
//! emptied it; created at the first of those). The providers' generations
//! are bumped as each run is folded, in log order.
//!
//! A merge writes the folded consumers by binary `COPY`: straight into
//! `consumers` and `allocations` those the tables cannot hold yet (while
//! only merges wrote the tables, replay remembers which consumers they
//! wrote: nothing to replace, no index needed), the others into two staging
//! tables merged set-wise ([`MERGE`], which scans the tables; so at a merge
//! forced only by memory, a few such consumers stay folded for a later
//! one). A merge happens before anything else reads or writes consumers or
//! allocations ([`touches_allocations`]), when [`HELD`] consumers are
//! folded (memory stays bounded), and at the end. The indexes of
//! `consumers` and `allocations` are built, once, in
//! bulk, at the first merge something else will read after.

use berth_core::Event;
use deadpool_postgres::Transaction;

use super::placement::Bumps;
use crate::{sql, StoreError};

mod pending;

/// Consumers folded in memory before a merge writes them: a few hundred
/// bytes each, so a few tens of MB at most.
pub(crate) const HELD: usize = 40_000;
/// At a merge forced by memory, consumers the tables may hold stay folded
/// (a merge of them scans the tables) until there are this many times
/// [`HELD`] of them.
const CARRIED: usize = 4;

/// The staging tables, in the scratch schema `{scratch}`: no index, no
/// constraint; rolled back with the replay. A staged consumer says whether
/// a replacement emptied it (its row from before is gone) and whether it is
/// kept (its last replacement held something).
pub(crate) const CREATE: &str = "
    CREATE UNLOGGED TABLE {scratch}.staged_consumers (
        uuid uuid, project_id text, user_id text, consumer_type text, generation int8, created_at timestamptz,
        updated_at timestamptz, emptied bool, kept bool);
    CREATE UNLOGGED TABLE {scratch}.staged_allocations (
        consumer_uuid uuid, provider_uuid uuid, resource_class text, used int8, during tstzrange, project_id text,
        user_id text, ordinal int4)";

/// The providers a run of replacements bumps, given their new generations
/// (as `WRITE_ALLOCATIONS` does).
const BUMP: &str = "
    WITH b AS MATERIALIZED (SELECT * FROM unnest($1::uuid[], $2::int8[], $3::timestamptz[]) AS b(uuid, n, at))
    UPDATE providers p SET generation = p.generation + b.n, updated_at = greatest(p.updated_at, b.at)
    FROM b WHERE p.uuid = ANY($1) AND p.uuid = b.uuid";

/// The staged consumers merged into tables that may hold rows: their
/// earlier allocations gone (a replacement replaces them all), the rows of
/// those emptied gone, the rows left updated (a generation per staged
/// replacement), the others made; then their allocations. Plain joins, no
/// `ON CONFLICT`: it holds with or without the tables' indexes.
const MERGE: &str = "
    DELETE FROM allocations a USING staged_consumers s WHERE a.consumer_uuid = s.uuid;
    DELETE FROM consumers c USING staged_consumers s WHERE s.emptied AND c.uuid = s.uuid;
    UPDATE consumers c SET project_id = s.project_id, user_id = s.user_id, consumer_type = s.consumer_type,
           generation = c.generation + s.generation, updated_at = s.updated_at
        FROM staged_consumers s WHERE s.kept AND c.uuid = s.uuid;
    INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at)
        SELECT uuid, project_id, user_id, consumer_type, generation, created_at, updated_at
        FROM staged_consumers s WHERE s.kept AND NOT EXISTS (SELECT 1 FROM consumers c WHERE c.uuid = s.uuid);
    INSERT INTO allocations SELECT * FROM staged_allocations;
    TRUNCATE staged_consumers, staged_allocations";

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

/// Where replay stands with the folded replacements.
pub(crate) struct Staging {
    /// The indexes of `consumers` and `allocations`, built at the first
    /// merge that something else will read after.
    indexes: Vec<String>,
    indexed: bool,
    /// While every row of `consumers` and `allocations` was written by a
    /// merge, the consumers those may hold: any other can be written
    /// straight in. `None` once anything else wrote them.
    merged: Option<foldhash::HashSet<uuid::Uuid>>,
    pending: pending::Pending,
    /// Consumers folded at most before a merge, besides those carried:
    /// folded consumers the tables may hold, left for a later merge.
    held: usize,
    carried: usize,
    /// How many replacements were folded, and how many writes of folded
    /// consumers were made (each a `COPY` straight in or a staged merge).
    pub(crate) staged: u64,
    pub(crate) merges: u64,
}

impl Staging {
    /// With `consumers` and `allocations` empty, and without `indexes`, the
    /// definitions of the indexes they are to have; `held` consumers folded
    /// at most (see [`HELD`]).
    pub(crate) fn new(indexes: Vec<String>, held: usize) -> Staging {
        let pending = pending::Pending::default();
        let merged = Some(foldhash::HashSet::default());
        Staging { indexes, indexed: false, merged, pending, held: held.max(1), carried: 0, staged: 0, merges: 0 }
    }

    /// Applies `events` in order, as [`super::apply_all`] would.
    pub(crate) async fn apply_all(&mut self, tx: &Transaction<'_>, events: &[&Event]) -> Result<(), StoreError> {
        let mut i = 0;
        while i < events.len() {
            let staging = stageable(events[i]).is_some();
            let end =
                events[i..].iter().position(|e| stageable(e).is_some() != staging).map_or(events.len(), |n| i + n);
            let run = &events[i..end];
            if staging {
                self.stage(tx, run).await?;
            } else {
                if run.iter().any(|e| touches_allocations(e)) {
                    self.merge_for_reading(tx).await?;
                }
                super::apply_all(tx, run).await?;
            }
            i = end;
        }
        Ok(())
    }

    /// Merges what is folded, at the end of the log: the tables are then
    /// complete (and indexed only if something read them before).
    pub(crate) async fn finish(&mut self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        self.merge(tx, true).await
    }

    /// Merges what is folded so that an event can read and write
    /// `consumers` and `allocations` as applying one by one leaves them;
    /// builds their indexes the first time.
    async fn merge_for_reading(&mut self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        self.merge(tx, true).await?;
        self.merged = None;
        if !self.indexed {
            tx.batch_execute(&self.indexes.join(";")).await?;
            self.indexed = true;
        }
        Ok(())
    }

    /// Writes what is folded, if anything: by `COPY` into the tables
    /// themselves for the consumers they cannot hold yet; the others are
    /// staged and merged, unless `all` is false and they are few, when they
    /// stay folded for a later merge (a merge scans the tables).
    async fn merge(&mut self, tx: &Transaction<'_>, all: bool) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Some(merged) = &mut self.merged {
            let fresh: Vec<(uuid::Uuid, bool)> =
                self.pending.consumers().filter(|(u, _)| !merged.contains(u)).map(|(u, kept)| (*u, kept)).collect();
            if !fresh.is_empty() {
                self.pending.copy(tx, false, |u| !merged.contains(u)).await?;
                self.pending.retain(|u| merged.contains(u));
                merged.extend(fresh.into_iter().filter(|(_, kept)| *kept).map(|(u, _)| u));
                self.merges += 1;
            }
            self.carried = self.pending.len();
            if self.pending.is_empty() || (!all && self.carried < self.held.saturating_mul(CARRIED)) {
                return Ok(());
            }
        }
        self.pending.copy(tx, true, |_| true).await?;
        // Set-wise: scans and hash joins, whatever replay's lookups prefer.
        tx.batch_execute(&format!("SET LOCAL enable_seqscan = on; {MERGE}; SET LOCAL enable_seqscan = off")).await?;
        self.pending.clear();
        (self.carried, self.merges) = (0, self.merges + 1);
        Ok(())
    }

    /// Folds a run of replacements naming their bumps, merging whenever
    /// [`Staging::held`] consumers are folded, and bumps those providers.
    async fn stage(&mut self, tx: &Transaction<'_>, run: &[&Event]) -> Result<(), StoreError> {
        let mut bumps = Bumps::default();
        for e in run {
            let (Some(bumped), Event::AllocationsReplaced { at, .. }) = (stageable(e), e) else {
                unreachable!("only replacements naming their bumps are staged");
            };
            bumps.add(bumped, *at);
            self.pending.push(e);
            if self.pending.len() >= self.held.saturating_add(self.carried) {
                self.merge(tx, false).await?;
            }
        }
        let (bumped, counts, bumped_at) = bumps.columns();
        sql::execute(tx, BUMP, &[&bumped, &counts, &bumped_at]).await?;
        self.staged += run.len() as u64;
        Ok(())
    }
}
