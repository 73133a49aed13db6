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
//! wrote: nothing to replace, no index needed); the others are staged and
//! merged set-wise ([`MERGE`], which scans the tables; so at a merge forced
//! only by memory, a few such consumers stay folded for a later one), their
//! allocations then written by `COPY` too. While merges alone write the
//! tables, the open-ended sums are kept in memory as they write and delete
//! allocations, so the sums need no scan at the end.
//!
//! A merge happens before anything else reads or writes consumers or
//! allocations ([`touches_allocations`]), when [`HELD`] consumers are
//! folded (memory stays bounded), and at the end. The indexes of
//! `consumers` and `allocations` are built, once, in bulk, at the first
//! merge something else will read after.

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

/// The staging table, in the scratch schema `{scratch}`: no index, no
/// constraint; rolled back with the replay. A staged consumer says whether
/// a replacement emptied it (its row from before is gone) and whether it is
/// kept (its last replacement held something).
pub(crate) const CREATE: &str = "
    CREATE UNLOGGED TABLE {scratch}.staged_consumers (
        uuid uuid, project_id text, user_id text, consumer_type text, generation int8, created_at timestamptz,
        updated_at timestamptz, emptied bool, kept bool)";

/// The providers a run of replacements bumps, given their new generations
/// (as `WRITE_ALLOCATIONS` does).
const BUMP: &str = "
    WITH b AS MATERIALIZED (SELECT * FROM unnest($1::uuid[], $2::int8[], $3::timestamptz[]) AS b(uuid, n, at))
    UPDATE providers p SET generation = p.generation + b.n, updated_at = greatest(p.updated_at, b.at)
    FROM b WHERE p.uuid = ANY($1) AND p.uuid = b.uuid";

/// The staged consumers merged into tables that may hold rows, first their
/// earlier allocations gone (a replacement replaces them all): [`DELETE`],
/// or [`DELETE_SUMMED`] answering the open-ended ones deleted, summed by
/// provider, class, project and user. Then each staged consumer's row from
/// before, if any, is deleted and the kept ones written anew, adding to
/// the old row's generations and keeping its creation unless a replacement
/// emptied it: one scan of `consumers`. Plain joins, no `ON CONFLICT`: it
/// holds with or without the tables' indexes. The new allocations follow
/// by `COPY`.
const DELETE: &str = "DELETE FROM allocations a USING staged_consumers s WHERE a.consumer_uuid = s.uuid";
const DELETE_SUMMED: &str = "
    WITH d AS (DELETE FROM allocations a USING staged_consumers s WHERE a.consumer_uuid = s.uuid
               RETURNING a.provider_uuid, a.resource_class, a.project_id, a.user_id, a.used, a.during)
    SELECT provider_uuid, resource_class, project_id, user_id, sum(used)::int8 AS used, count(*) AS n FROM d
        WHERE upper_inf(during) GROUP BY 1, 2, 3, 4";
const MERGE: &str = "
    WITH d AS (DELETE FROM consumers c USING staged_consumers s WHERE c.uuid = s.uuid
               RETURNING c.uuid, c.generation, c.created_at)
    INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at)
        SELECT s.uuid, s.project_id, s.user_id, s.consumer_type,
               CASE WHEN s.emptied OR d.uuid IS NULL THEN s.generation ELSE d.generation + s.generation END,
               CASE WHEN s.emptied OR d.uuid IS NULL THEN s.created_at ELSE d.created_at END, s.updated_at
        FROM staged_consumers s LEFT JOIN d ON d.uuid = s.uuid WHERE s.kept;
    TRUNCATE staged_consumers";

/// Whether applying `event` reads or writes `consumers` or `allocations`
/// (see `placement::apply`): the staged replacements must be merged first.
/// No wildcard arm: a new event type must say.
fn touches_allocations(event: &Event) -> bool {
    match event {
        // Loans write their consumer's row.
        Event::AllocationsReplaced { .. }
        | Event::ResourceClassRenamed { .. }
        | Event::CapacityLent { .. }
        | Event::LoanReturned { .. } => true,
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
        | Event::LeaseSplit { .. }
        | Event::LeaseTransferOffered { .. }
        | Event::LeaseTransferWithdrawn { .. }
        | Event::LeaseTransferred { .. }
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
        | Event::LeaseShared { .. }
        | Event::UpdateHookFinished { .. }
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
        | Event::ManagerResumed { .. }
        | Event::LoanCut { .. }
        | Event::ReclaimClaimed { .. }
        | Event::ReclaimFinished { .. } => false,
    }
}

/// The providers a replacement that can be staged bumps: one naming them.
fn stageable(event: &Event) -> Option<&[uuid::Uuid]> {
    match event {
        Event::AllocationsReplaced { providers_bumped: Some(bumped), .. } => Some(bumped),
        _ => None,
    }
}

/// What merges alone wrote.
#[derive(Default)]
struct Merged {
    /// The consumers `consumers` may hold: any other can be written
    /// straight in.
    consumers: foldhash::HashSet<uuid::Uuid>,
    /// The open-ended sums of `allocations`, kept as they are written.
    open: pending::OpenSums,
}

/// Where replay stands with the folded replacements.
pub(crate) struct Staging {
    /// The indexes of `consumers` and `allocations`, built at the first
    /// merge that something else will read after.
    indexes: Vec<String>,
    indexed: bool,
    /// While every row of `consumers` and `allocations` was written by a
    /// merge, what they hold. `None` once anything else wrote them.
    merged: Option<Merged>,
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
        let merged = Some(Merged::default());
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
        if let Some(Merged { consumers: merged, open }) = &mut self.merged {
            let fresh: Vec<(uuid::Uuid, bool)> =
                self.pending.consumers().filter(|(u, _)| !merged.contains(u)).map(|(u, kept)| (*u, kept)).collect();
            if !fresh.is_empty() {
                self.pending.copy_consumers(tx, false, |u| !merged.contains(u)).await?;
                self.pending.copy_allocations(tx, |u| !merged.contains(u), Some(open)).await?;
                self.pending.retain(|u| merged.contains(u));
                merged.extend(fresh.into_iter().filter(|(_, kept)| *kept).map(|(u, _)| u));
                self.merges += 1;
            }
            self.carried = self.pending.len();
            if self.pending.is_empty() || (!all && self.carried < self.held.saturating_mul(CARRIED)) {
                return Ok(());
            }
        }
        self.pending.copy_consumers(tx, true, |_| true).await?;
        // Set-wise: scans and hash joins, whatever replay's lookups prefer.
        tx.batch_execute("SET LOCAL enable_seqscan = on").await?;
        match &mut self.merged {
            Some(Merged { open, .. }) => {
                for r in tx.query(DELETE_SUMMED, &[]).await? {
                    let (provider, class, project, user) =
                        (r.get("provider_uuid"), r.get("resource_class"), r.get("project_id"), r.get("user_id"));
                    open.remove(provider, class, project, user, r.get("used"), r.get("n"));
                }
            }
            None => tx.batch_execute(DELETE).await?,
        }
        tx.batch_execute(&format!("{MERGE}; SET LOCAL enable_seqscan = off")).await?;
        self.pending.copy_allocations(tx, |_| true, self.merged.as_mut().map(|m| &mut m.open)).await?;
        self.pending.clear();
        (self.carried, self.merges) = (0, self.merges + 1);
        Ok(())
    }

    /// Whether [`Staging::write_sums`] writes them from memory.
    pub(crate) fn sums_kept(&self) -> bool {
        self.merged.is_some()
    }

    /// Writes the open-ended sums (`projection::SUMS`) of the allocations
    /// replayed: from what the merges kept in memory when they alone wrote
    /// `allocations`, else by one scan of it. After [`Staging::finish`].
    pub(crate) async fn write_sums(&self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        let Some(Merged { open, .. }) = &self.merged else {
            // One scan, whatever indexes the allocations have by now.
            return Ok(tx.batch_execute(&format!("SET LOCAL enable_seqscan = on; {}", super::rebuild_sums())).await?);
        };
        let providers = open.by(|(p, class, _, _)| (*p, class.clone()))?;
        let (mut uuids, mut classes, mut used) = (Vec::new(), Vec::new(), Vec::new());
        for ((p, c), n) in &providers {
            uuids.push(*p);
            classes.push(&**c);
            used.push(*n);
        }
        sql::execute(
            tx,
            "INSERT INTO provider_open_usage (provider_uuid, resource_class, used)
                 SELECT * FROM unnest($1::uuid[], $2::text[], $3::int8[])",
            &[&uuids, &classes, &used],
        )
        .await?;
        let projects = open.by(|(_, class, project, user)| (project.clone(), user.clone(), class.clone()))?;
        let (mut ps, mut us, mut cs, mut used) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((p, u, c), n) in &projects {
            ps.push(&**p);
            us.push(&**u);
            cs.push(&**c);
            used.push(*n);
        }
        sql::execute(
            tx,
            "INSERT INTO project_open_usage (project_id, user_id, resource_class, used)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[])",
            &[&ps, &us, &cs, &used],
        )
        .await?;
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
