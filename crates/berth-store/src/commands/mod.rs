//! Commands: each is one transaction at READ COMMITTED that
//! 1. locks the rows it depends on, always in the same order (quota guards,
//!    then consumers, then providers, each sorted: crate::lock), so
//!    concurrent commands queue instead of deadlocking or deciding on stale
//!    reads;
//! 2. compares the generations the client sent;
//! 3. reads what it needs (statements after the locks see every earlier
//!    writer's committed rows) and decides with berth-core's rules;
//! 4. appends its events to the log and applies them to the projections.
//!
//! Events are appended only after every lock is held, so two commands that
//! touch the same rows get positions in the order they committed: replay by
//! position reproduces what they saw.

mod allocations;
mod catalog;
mod claims;
mod heal;
mod hosts;
mod lease_events;
mod leases;
mod loans;
mod maintenance;
mod providers;
mod quotas;
mod request_keys;

pub use allocations::{ConsumerAllocations, GenerationCheck, ReshapeInventory, PREEMPTIBLE};
/// Placement's codes for what a request names that does not exist.
pub(crate) use claims::Claims;
pub use claims::{cores, sized_lanes as sized_claim_lanes, DEFAULT_GATHER as DEFAULT_CLAIM_GATHER};
pub use heal::{Demands, HealOutcome, ToHeal};
pub use hosts::{check_capabilities, HostChange, NewHost, HOST_FIELDS};
pub use lease_events::{Claim, Claimed, Finish, HealHook, HeldHost, KeptConnection, Outcome, Recorded, UpdateHook};
pub(crate) use leases::heal::Placing;
pub(crate) use leases::SmallCloud;
pub use leases::{
    Handover, LeaseDates, LeaseUpdate, NewLease, NewReservation, ReservationUpdate, SplitAsk, SLOT_CONSUMER_TYPE,
};
pub use loans::Reclaim;
pub use maintenance::{MaintenanceWindow, NewMaintenance};
pub use providers::{InventoryChange, NewProvider, ProviderUpdate};
pub use quotas::OverLimit;
pub use request_keys::{Keyed, RequestKey};

use berth_core::{Event, EventMeta};

use crate::client::GenericClient;
/// The instant a command decides at: the database's, read in its transaction.
pub(crate) use crate::clock::now;
use crate::log::Append;
use crate::tx::Pipelined;
use crate::StoreError;

/// Appends `events` and applies them, in the command's transaction; runs
/// of like events are applied set-wise ([`crate::projection::apply_all`]).
pub(crate) async fn record(
    tx: &impl GenericClient,
    meta: &EventMeta,
    events: &[Event],
) -> Result<Vec<i64>, StoreError> {
    let refs: Vec<&Event> = events.iter().collect();
    let positions =
        appended_and_applied(crate::log::append(tx, meta, events), crate::projection::apply_all(tx, &refs)).await?;
    loans::after_writes(tx, meta, &refs).await?;
    Ok(positions)
}

/// As [`record`], for events of several requests, each with its own metadata.
pub(crate) async fn record_each(
    tx: &impl GenericClient,
    events: &[(&EventMeta, Event)],
) -> Result<Vec<i64>, StoreError> {
    let refs: Vec<&Event> = events.iter().map(|(_, e)| e).collect();
    let positions =
        appended_and_applied(crate::log::append_each(tx, events), crate::projection::apply_all(tx, &refs)).await?;
    if let Some((meta, _)) = events.first() {
        loans::after_writes(tx, meta, &refs).await?;
    }
    Ok(positions)
}

/// As [`record_each`], and commits: in the same round trip when one
/// statement applies the events (a batch of claims:
/// [`crate::projection::one_statement`]), else recorded, then committed.
pub(crate) async fn record_each_and_commit(
    tx: &Pipelined<'_>,
    events: &[(&EventMeta, Event)],
) -> Result<Vec<i64>, StoreError> {
    let refs: Vec<&Event> = events.iter().map(|(_, e)| e).collect();
    let append = Append::each(events);
    let Some(apply) = crate::projection::one_statement(&refs) else {
        let positions = record_each(tx.client().await?, events).await?;
        tx.commit().await?;
        return Ok(positions);
    };
    let ((append_sql, append_params), (apply_sql, apply_params)) = (append.statement(), apply.statement());
    let [positions, _] = tx.commit_with([(append_sql, &append_params[..]), (apply_sql, &apply_params[..])]).await?;
    Ok(Append::positions(&positions))
}

/// As [`record`], in a [`Pipelined`] transaction, and commits: in the same
/// round trip when the events are a lease's creation and nothing else
/// ([`crate::projection::creations_only`]: the append, the rows and the
/// `COMMIT` go together), else recorded, then committed.
pub(crate) async fn record_and_commit(
    tx: &Pipelined<'_>,
    meta: &EventMeta,
    events: &[Event],
) -> Result<Vec<i64>, StoreError> {
    let refs: Vec<&Event> = events.iter().collect();
    // Where this process met loans lately, it takes the way that cuts
    // them; elsewhere the commit asks (loans::NO_LOANS_ON) and, refused,
    // the command starts over.
    let Some(write) = crate::projection::creations_only(&refs).filter(|_| !loans::seen_lately()) else {
        let positions = record(tx.client().await?, meta, events).await?;
        tx.commit().await?;
        return Ok(positions);
    };
    let append = Append::one(meta, events);
    let (append_sql, append_params) = append.statement();
    let params = write.params();
    let providers = loans::providers_taken(&refs);
    let guard = [&providers as &(dyn tokio_postgres::types::ToSql + Sync)];
    let mut statements: Vec<crate::sql::Statement<'_>> = vec![(append_sql, &append_params[..])];
    statements.extend(params.iter().map(|(sql, p)| (*sql, &p[..])));
    if !providers.is_empty() {
        statements.push((loans::NO_LOANS_ON, &guard[..]));
    }
    let rows = tx.commit_with_all(&statements).await.inspect_err(|e| {
        if e.sqlstate() == Some(loans::IN_THE_WAY) {
            loans::seen();
        }
    })?;
    Ok(Append::positions(&rows[0]))
}

/// Sends the append and the application together (pipelined; the server
/// runs them in order) and answers the append's positions, or the error
/// that caused the other.
async fn appended_and_applied(
    append: impl std::future::Future<Output = Result<Vec<i64>, StoreError>>,
    apply: impl std::future::Future<Output = Result<(), StoreError>>,
) -> Result<Vec<i64>, StoreError> {
    match tokio::join!(append, apply) {
        (Ok(positions), Ok(())) => Ok(positions),
        (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
        (Err(a), Err(b)) => Err(crate::sql::root_cause(a, b, StoreError::sqlstate)),
    }
}
