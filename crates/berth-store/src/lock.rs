//! The lock order, in one place. A command locks the rows it depends on
//! before it reads what it decides on, in this order, each kind sorted by
//! key, so concurrent commands queue behind each other instead of
//! deadlocking or deciding on stale reads:
//!
//! - first, a keyed lease request's [`request_key`] (an advisory lock: the
//!   key's row may not exist yet), so two requests with one key queue
//!   instead of both creating;
//! 0. [`manager_state`]: the one row saying whether managers are paused;
//!    a pause takes it for update, and each claim key-share locks it
//!    ([`MANAGER_CLAIMING`]) first in its `SKIP LOCKED` statement, so a
//!    pause waits for claims under way and no claim starts after it;
//! 1. [`leases`], then their [`lease_events`], by id: only the lease
//!    commands and the manager's record take them, before anything below;
//! 2. [`guards`]: the projects' rows in `quota_guards` (only where some
//!    limit bears on the project; see crate::quota);
//! 3. [`consumers`], by uuid;
//! 4. [`providers`], by uuid.
//!
//! A new lease locks only the providers it chose on a read taken without
//! locks (`commands/leases/plan.rs`), after a savepoint ([`CHOOSING`]), and
//! reads them again under the lock; when another command took the room
//! meanwhile, it rolls back to the savepoint ([`give_back_chosen`], which
//! gives those locks back) before it locks its next choice, so it never
//! waits for a provider while holding others out of this order. It passes
//! over a provider another new lease is writing ([`CHOSEN_UNLESS_WRITTEN`]:
//! an advisory mark, tested and never waited for) rather than queue for it.
//!
//! Nothing else in Berth writes `FOR UPDATE`. The exceptions on purpose
//! skip locked rows instead of waiting for them (`SKIP LOCKED`), so these
//! statements never wait out of this order: the manager's claim of due lease events
//! (`commands/lease_events/claim.rs`), its claim of due reclaims of lent
//! capacity (`commands/loans/reclaim.rs`), and a heal on a large cloud locking
//! each replacement host as it chooses it ([`CHOSEN_IF_FREE`]).
//!
//! Each function here sorts its keys and owns its statement. The claim path
//! sends its locks in one pipelined batch with its reads, so for it this
//! module hands out the statements ([`consumers_holding`],
//! [`providers_with_inventories`]) over keys already [`Sorted`].
//!
//! Catalogue rows (resource classes, traits, host properties) are locked
//! alone by the commands that change them; a command that puts them on a
//! provider share-locks them after the provider.

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::{sql, StoreError};

mod rows;
pub(crate) use rows::{
    Chosen, ClaimedEvent, ConsumerHolding, LockedConsumer, LockedEvent, LockedHost, LockedLease, LockedProvider,
    NamedProvider, ProviderInventory,
};

/// Keys sorted and without repeats: the order rows of one kind are locked in.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sorted<T>(Vec<T>);

impl<T: Ord> FromIterator<T> for Sorted<T> {
    fn from_iter<I: IntoIterator<Item = T>>(keys: I) -> Sorted<T> {
        let mut keys: Vec<T> = keys.into_iter().collect();
        keys.sort();
        keys.dedup();
        Sorted(keys)
    }
}

impl<T> std::ops::Deref for Sorted<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: ToSql + Sync> Sorted<T> {
    /// The keys as one array parameter.
    pub(crate) fn param(&self) -> &(dyn ToSql + Sync) {
        &self.0
    }
}

// First: a keyed request's key.

/// Locks the idempotency key `key` of `caller` until the transaction ends.
/// The two-key form of advisory lock (a key space apart from the one-key
/// form that migrations use), with [`REQUEST_KEY_CLASS`] first.
pub(crate) async fn request_key(tx: &impl GenericClient, caller: &str, key: &str) -> Result<(), StoreError> {
    tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2 || chr(1) || $3))", &[&REQUEST_KEY_CLASS, &caller, &key])
        .await?;
    Ok(())
}

/// The first key of [`request_key`]'s advisory locks: "keyd".
const REQUEST_KEY_CLASS: i32 = 0x6b65_7964;

// 0. The manager's state.

/// Locks the manager's state for a change; whether managers are paused.
pub(crate) async fn manager_state(tx: &impl GenericClient) -> Result<bool, StoreError> {
    Ok(tx.query_one("SELECT paused FROM manager_state FOR UPDATE", &[]).await?.get("paused"))
}

/// Key-share locks the manager's state for a claim (claims do not wait on
/// each other, only on a pause being made), as the first step of the claim
/// statement itself (a CTE it reads before anything else): one round trip
/// less per claim than a statement of its own. Under READ COMMITTED a
/// claim that waited for a pause reads the row as the pause left it.
pub(crate) const MANAGER_CLAIMING: &str = "SELECT paused FROM manager_state FOR KEY SHARE";

// 1. Leases and their lease events.

const LEASES: &str = "SELECT id FROM leases WHERE id = ANY($1) ORDER BY id FOR UPDATE";

/// Locks the leases of `ids` that exist; answers their ids, sorted.
pub(crate) async fn leases(tx: &impl GenericClient, ids: &[Uuid]) -> Result<Vec<Uuid>, StoreError> {
    let ids: Sorted<Uuid> = ids.iter().copied().collect();
    Ok(tx.query(LEASES, &[ids.param()]).await?.iter().map(|r| r.get("id")).collect())
}

/// Locks one lease; whether it exists.
pub(crate) async fn lease(tx: &impl GenericClient, id: Uuid) -> Result<bool, StoreError> {
    Ok(!leases(tx, &[id]).await?.is_empty())
}

/// Locks leases as [`LEASES`] does, with what the manager's recorder
/// decides on ([`LockedLease`]), sorted. One statement, not a lock
/// and a read.
const LEASES_STATUS: &str = "SELECT id, status, degraded FROM leases WHERE id = ANY($1) ORDER BY id FOR UPDATE";

/// [`LEASES_STATUS`] over `ids`, to send in a pipeline.
pub(crate) fn leases_status_stmt(ids: &Sorted<Uuid>) -> (&'static str, [&(dyn ToSql + Sync); 1]) {
    (LEASES_STATUS, [ids.param()])
}

/// Locks lease events with their state ([`LockedEvent`]), sorted.
const LEASE_EVENTS: &str = "SELECT id, status, attempts, claimed_by, event_type FROM lease_events
     WHERE id = ANY($1) ORDER BY id FOR UPDATE";

/// [`LEASE_EVENTS`] over `ids`, to send in a pipeline after their leases.
pub(crate) fn lease_events(ids: &Sorted<Uuid>) -> (&'static str, [&(dyn ToSql + Sync); 1]) {
    (LEASE_EVENTS, [ids.param()])
}

/// Locks one lease event (its lease locked first): its status, if it
/// belongs to `lease`.
pub(crate) async fn lease_event(tx: &impl GenericClient, lease: Uuid, id: Uuid) -> Result<Option<String>, StoreError> {
    let row = tx
        .query_opt("SELECT status FROM lease_events WHERE id = $1 AND lease_id = $2 FOR UPDATE", &[&id, &lease])
        .await?;
    Ok(row.map(|r| r.get("status")))
}

/// Locks the lease events of `ids` that `claimer` holds in progress,
/// sorted by id. For renewing a claim, which touches no lease row.
pub(crate) async fn claimed_events(
    tx: &impl GenericClient,
    ids: &[Uuid],
    claimer: &str,
) -> Result<Vec<ClaimedEvent>, StoreError> {
    let ids: Sorted<Uuid> = ids.iter().copied().collect();
    let rows = tx
        .query(
            "SELECT lease_id, id, attempts FROM lease_events
             WHERE id = ANY($1) AND status = 'IN_PROGRESS' AND claimed_by = $2 ORDER BY id FOR UPDATE",
            &[ids.param(), &claimer],
        )
        .await?;
    Ok(rows.iter().map(ClaimedEvent::from_row).collect())
}

// 2. Quota guards.

/// Makes the guard rows of the projects that any limit bears on. Sent first;
/// a separate statement from the lock, so that the lock's snapshot sees a row
/// a concurrent first user inserted (this statement waits for it).
pub(crate) const GUARD_INSERT: &str = "INSERT INTO quota_guards (project_id)
     SELECT p FROM unnest($1::text[]) AS p
     WHERE EXISTS (SELECT 1 FROM quota_limits l WHERE l.project_id = '' OR l.project_id = p)
     ORDER BY p ON CONFLICT DO NOTHING";

/// Locks the guards of the projects that any limit bears on, sorted.
pub(crate) const GUARD_LOCK: &str = "SELECT g.project_id FROM quota_guards g
     WHERE g.project_id = ANY($1)
       AND EXISTS (SELECT 1 FROM quota_limits l WHERE l.project_id = '' OR l.project_id = g.project_id)
     ORDER BY g.project_id FOR UPDATE";

const GUARD_INSERT_ALL: &str =
    "INSERT INTO quota_guards (project_id) SELECT p FROM unnest($1::text[]) AS p ORDER BY p ON CONFLICT DO NOTHING";
const GUARD_LOCK_ALL: &str =
    "SELECT project_id FROM quota_guards WHERE project_id = ANY($1) ORDER BY project_id FOR UPDATE";

/// Locks the guards of `projects` that any limit bears on; answers the
/// projects guarded (for commands that do not pipeline [`GUARD_INSERT`] and
/// [`GUARD_LOCK`] with their own first statements).
pub(crate) async fn guards(tx: &impl GenericClient, projects: &[String]) -> Result<Vec<Row>, StoreError> {
    let projects: Sorted<String> = projects.iter().cloned().collect();
    let guard = [projects.param()];
    let [_, guards] = sql::pipeline(tx, [(GUARD_INSERT, &guard[..]), (GUARD_LOCK, &guard[..])]).await?;
    Ok(guards)
}

/// Guards `projects` whether or not a limit bears on them yet: for commands
/// that change limits, so that raises in flight finish first, and for a
/// limit that appeared after a raise locked its guards.
pub(crate) async fn all_guards(tx: &impl GenericClient, projects: &[String]) -> Result<(), StoreError> {
    let projects: Sorted<String> = projects.iter().cloned().collect();
    let guard = [projects.param()];
    sql::pipeline(tx, [(GUARD_INSERT_ALL, &guard[..]), (GUARD_LOCK_ALL, &guard[..])]).await?;
    Ok(())
}

// 3. Consumers.

const CONSUMERS: &str = "SELECT uuid, project_id, user_id, consumer_type FROM consumers
     WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE";

/// Locks the consumers of `ids` that exist; answers them, sorted.
pub(crate) async fn consumers(tx: &impl GenericClient, ids: &[Uuid]) -> Result<Vec<LockedConsumer>, StoreError> {
    let ids: Sorted<Uuid> = ids.iter().copied().collect();
    Ok(tx.query(CONSUMERS, &[ids.param()]).await?.iter().map(LockedConsumer::from_row).collect())
}

/// Locks consumers with what they hold: one row per allocation (or one
/// with nulls), a [`ConsumerHolding`]. What they hold cannot change while
/// they are locked.
pub(crate) const CONSUMERS_HOLDING: &str = "SELECT c.uuid, c.generation, a.provider_uuid, a.resource_class, a.used,
            lower(a.during) AS start_at, upper(a.during) AS end_at, c.consumer_type
     FROM consumers c LEFT JOIN allocations a ON a.consumer_uuid = c.uuid
     WHERE c.uuid = ANY($1) ORDER BY c.uuid FOR UPDATE OF c";

/// [`CONSUMERS_HOLDING`] over `ids`, to send in a pipeline.
pub(crate) fn consumers_holding(ids: &Sorted<Uuid>) -> (&'static str, [&(dyn ToSql + Sync); 1]) {
    (CONSUMERS_HOLDING, [ids.param()])
}

// 4. Providers.

/// Locks providers with their inventories: those of `$1` and those the
/// consumers of `$2` hold now. One array of keys (not `uuid = ANY($1) OR
/// uuid IN (...)`), so the providers are found by their key however many
/// there are. Rows: [`ProviderInventory`], one per inventory or one with
/// nulls.
pub(crate) const PROVIDERS_WITH_INVENTORIES: &str =
    "SELECT p.uuid, p.generation, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
            i.allocation_ratio
     FROM providers p LEFT JOIN inventories i ON i.provider_uuid = p.uuid
     WHERE p.uuid = ANY($1::uuid[] || ARRAY(SELECT provider_uuid FROM allocations WHERE consumer_uuid = ANY($2)))
     ORDER BY p.uuid FOR UPDATE OF p";

/// [`PROVIDERS_WITH_INVENTORIES`] over `ids` and the providers `holders`
/// hold now, to send in a pipeline.
pub(crate) fn providers_with_inventories<'a>(
    ids: &'a Sorted<Uuid>,
    holders: &'a Sorted<Uuid>,
) -> (&'static str, [&'a (dyn ToSql + Sync); 2]) {
    (PROVIDERS_WITH_INVENTORIES, [ids.param(), holders.param()])
}

const PROVIDERS: &str = "SELECT uuid, generation, parent_uuid FROM providers
     WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE";

/// [`PROVIDERS`] over `ids`, to send in a pipeline.
pub(crate) fn providers_stmt(ids: &Sorted<Uuid>) -> (&'static str, [&(dyn ToSql + Sync); 1]) {
    (PROVIDERS, [ids.param()])
}

/// The savepoint taken before a new lease locks the providers it chose.
pub(crate) const CHOOSING: &str = "SAVEPOINT choosing_providers";

/// As [`CHOOSING`], for a choice after the first: gives back what the
/// previous choice locked and marked (the savepoint stays), sent in the
/// same round trip as the next lock.
pub(crate) const CHOOSING_AGAIN: &str = "ROLLBACK TO SAVEPOINT choosing_providers";

/// The first key of the advisory locks by which a new lease marks the
/// providers it is writing ([`CHOSEN_UNLESS_WRITTEN`]): "nlse".
pub(crate) const WRITING_CLASS: i32 = 0x6e6c_7365;

/// Locks the chosen providers of `$1` unless another new lease is writing
/// one of them; then marks them as written by this one. Rows: each of `$1`
/// with whether no other new lease writes it; when one does, nothing is
/// locked or marked, and the caller decides again around it rather than
/// queue behind it.
///
/// The mark, a transaction-level advisory lock ([`WRITING_CLASS`], the
/// provider), is taken only once the row lock is held, so it says "being
/// written", not "waited for": a lease waiting for a row that another kind
/// of command holds is passed over by nobody. Another lease tests a mark
/// without keeping it (a session lock taken and given back at once), and a
/// mark is never waited for, so marks add no edge to the lock order. A mark
/// is a hint only: what a lease decides rests on the row locks and the
/// read under them, as without it.
pub(crate) const CHOSEN_UNLESS_WRITTEN: &str = "WITH free AS MATERIALIZED (
         SELECT u, CASE WHEN pg_try_advisory_lock($2, hashtext(u::text))
                        THEN pg_advisory_unlock($2, hashtext(u::text)) ELSE false END AS free
         FROM unnest($1::uuid[]) AS u
     ), locked AS MATERIALIZED (
         SELECT p.uuid FROM providers p
         WHERE p.uuid = ANY($1) AND NOT EXISTS (SELECT 1 FROM free WHERE NOT free)
         ORDER BY p.uuid FOR UPDATE
     ), marked AS MATERIALIZED (
         SELECT pg_try_advisory_xact_lock($2, hashtext(uuid::text)) FROM locked
     )
     SELECT f.u AS provider, f.free FROM free f CROSS JOIN (SELECT count(*) FROM marked) m";

/// As [`CHOSEN_UNLESS_WRITTEN`], waiting for the rows whoever holds them:
/// for a lease that found no room around the providers being written.
pub(crate) const CHOSEN: &str = "WITH locked AS MATERIALIZED (
         SELECT p.uuid FROM providers p WHERE p.uuid = ANY($1) ORDER BY p.uuid FOR UPDATE
     ), marked AS MATERIALIZED (
         SELECT uuid, pg_try_advisory_xact_lock($2, hashtext(uuid::text)) FROM locked
     )
     SELECT uuid AS provider, true AS free FROM marked";

/// `statement` ([`CHOSEN_UNLESS_WRITTEN`] or [`CHOSEN`]) over `ids`, to
/// send in a pipeline after [`CHOOSING`] or [`CHOOSING_AGAIN`].
pub(crate) fn chosen_stmt<'a>(statement: &'a str, ids: &'a Sorted<Uuid>) -> (&'a str, [&'a (dyn ToSql + Sync); 2]) {
    (statement, [ids.param(), &WRITING_CLASS])
}

/// Locks those providers of `$1` that no other transaction holds, and
/// answers them (`uuid`); a provider another command holds is skipped, not
/// waited for. A heal, which already holds the hosts it moves slots off,
/// locks each replacement host it chooses so: it does not wait for a
/// provider out of this order, and passes over a host being written
/// (`commands/leases/plan.rs` `plan_near`). Rows this transaction locked
/// already are answered too. (When the hosts near a window cannot vouch
/// for a choice, the heal falls back to locking every candidate, which
/// may wait; a deadlock there starts the command over.)
pub(crate) const CHOSEN_IF_FREE: &str =
    "SELECT uuid FROM providers WHERE uuid = ANY($1) ORDER BY uuid FOR UPDATE SKIP LOCKED";

/// [`CHOSEN_IF_FREE`] over `ids`, to send in a pipeline.
pub(crate) fn chosen_if_free_stmt(ids: &Sorted<Uuid>) -> (&'static str, [&(dyn ToSql + Sync); 1]) {
    (CHOSEN_IF_FREE, [ids.param()])
}

/// Gives back the providers locked since [`CHOOSING`].
pub(crate) async fn give_back_chosen(tx: &impl GenericClient) -> Result<(), StoreError> {
    sql::execute(tx, CHOOSING_AGAIN, &[]).await?;
    Ok(())
}

/// Locks the providers of `ids` that exist; answers them, sorted.
pub(crate) async fn providers(tx: &impl GenericClient, ids: &[Uuid]) -> Result<Vec<LockedProvider>, StoreError> {
    let ids: Sorted<Uuid> = ids.iter().copied().collect();
    Ok(tx.query(PROVIDERS, &[ids.param()]).await?.iter().map(LockedProvider::from_row).collect())
}

/// Locks one provider, if it exists.
pub(crate) async fn provider(tx: &impl GenericClient, id: Uuid) -> Result<Option<LockedProvider>, StoreError> {
    Ok(providers(tx, &[id]).await?.into_iter().next())
}

/// Locks the providers named in `names` that exist, by uuid: each one's
/// name and uuid. Names are unique.
pub(crate) async fn providers_named(tx: &impl GenericClient, names: &[&str]) -> Result<Vec<NamedProvider>, StoreError> {
    let rows =
        tx.query("SELECT name, uuid FROM providers WHERE name = ANY($1) ORDER BY uuid FOR UPDATE", &[&names]).await?;
    Ok(rows.iter().map(NamedProvider::from_row).collect())
}

/// Share-locks a provider that another is made a child of, so that it
/// cannot be deleted meanwhile; whether it exists.
pub(crate) async fn parent(tx: &impl GenericClient, id: Uuid) -> Result<bool, StoreError> {
    Ok(tx.query_opt("SELECT 1 FROM providers WHERE uuid = $1 FOR SHARE", &[&id]).await?.is_some())
}

/// Locks an enrolled host's provider, if it is a host.
pub(crate) async fn host(tx: &impl GenericClient, id: Uuid) -> Result<Option<LockedHost>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT h.reservable, h.capabilities FROM providers p JOIN hosts h ON h.provider_uuid = p.uuid
             WHERE p.uuid = $1 FOR UPDATE OF p",
            &[&id],
        )
        .await?;
    Ok(row.as_ref().map(LockedHost::from_row))
}

// Catalogue rows, each locked alone.

/// Locks a resource class: whether it is standard, if it exists.
pub(crate) async fn resource_class(tx: &impl GenericClient, name: &str) -> Result<Option<bool>, StoreError> {
    let row = tx.query_opt("SELECT standard FROM resource_classes WHERE name = $1 FOR UPDATE", &[&name]).await?;
    Ok(row.map(|r| r.get("standard")))
}

/// Locks a trait: whether it is standard, if it exists.
pub(crate) async fn trait_named(tx: &impl GenericClient, name: &str) -> Result<Option<bool>, StoreError> {
    let row = tx.query_opt("SELECT standard FROM traits WHERE name = $1 FOR UPDATE", &[&name]).await?;
    Ok(row.map(|r| r.get("standard")))
}

/// Locks a host property; whether it exists.
pub(crate) async fn host_property(tx: &impl GenericClient, name: &str) -> Result<bool, StoreError> {
    Ok(tx.query_opt("SELECT 1 FROM host_properties WHERE name = $1 FOR UPDATE", &[&name]).await?.is_some())
}

/// Share-locks the traits of `names` that exist, so that a concurrent
/// delete waits for the command that puts them on a provider; answers them.
pub(crate) async fn traits_in_use(tx: &impl GenericClient, names: &[&str]) -> Result<Vec<String>, StoreError> {
    let names: Sorted<&str> = names.iter().copied().collect();
    let rows =
        tx.query("SELECT name FROM traits WHERE name = ANY($1) ORDER BY name FOR SHARE", &[names.param()]).await?;
    Ok(rows.iter().map(|r| r.get("name")).collect())
}

/// Share-locks the resource classes of `names` that exist, so that a
/// concurrent delete waits for the command that gives them inventory;
/// answers them.
pub(crate) async fn classes_in_use(tx: &impl GenericClient, names: &[&str]) -> Result<Vec<String>, StoreError> {
    let names: Sorted<&str> = names.iter().copied().collect();
    let rows = tx
        .query("SELECT name FROM resource_classes WHERE name = ANY($1) ORDER BY name FOR SHARE", &[names.param()])
        .await?;
    Ok(rows.iter().map(|r| r.get("name")).collect())
}
