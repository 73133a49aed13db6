//! Cutting loans short: every command that writes holds or inventories
//! checks, before it commits, the loans on the providers it wrote to. Where
//! its writes took capacity a loan sat on, the loan ends its lead before the
//! capacity is needed (now, if that is sooner), the newest loan first
//! (`berth_core::lend::cuts`), and the reclaim is due then. The command is
//! never refused or delayed for a loan.
//!
//! The providers written to are locked by the command, and a loan is lent
//! only with its providers locked, so the loans read here cannot change
//! before the commit. Without a loan on those providers this is one read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use berth_core::{lend, Event, EventMeta};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::books;
use crate::client::GenericClient;
use crate::commands::allocations::PREEMPTIBLE;
use crate::commands::now;
use crate::StoreError;

/// The providers `events` take capacity on or give less of: ordinary holds
/// written, inventories replaced.
fn taken_on(events: &[&Event]) -> BTreeSet<Uuid> {
    let mut out = BTreeSet::new();
    for e in events {
        match e {
            Event::AllocationsReplaced { consumer_type, allocations, .. }
                if consumer_type.as_deref() != Some(PREEMPTIBLE) =>
            {
                out.extend(allocations.iter().map(|a| a.provider))
            }
            Event::InventoriesReplaced { provider, .. } => {
                out.insert(*provider);
            }
            _ => {}
        }
    }
    out
}

/// Refuses (SQLSTATE [`IN_THE_WAY`]) when a loan runs now on a provider of
/// `$1`: sent with a commit made in one round trip, whose command then
/// starts over and goes [`after_writes`]' way.
pub(crate) const NO_LOANS_ON: &str = "SELECT berth_no_loans_on($1)";

/// The SQLSTATE of [`NO_LOANS_ON`]'s refusal.
pub(crate) const IN_THE_WAY: &str = "BL001";

/// The providers `events` take capacity on, for [`NO_LOANS_ON`].
pub(crate) fn providers_taken(events: &[&Event]) -> Vec<Uuid> {
    taken_on(events).into_iter().collect()
}

/// When this process last met a loan in a command's way (seconds since
/// [`EPOCH`], plus one; 0: never). Only a hint of which way to try first:
/// [`NO_LOANS_ON`] keeps the one-round-trip way right when it is stale.
static SEEN: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// How long after meeting a loan commands check for loans first.
const SEEN_FOR: Duration = Duration::from_secs(600);

/// This process met a loan in a command's way.
pub(crate) fn seen() {
    let epoch = EPOCH.get_or_init(Instant::now);
    SEEN.store(epoch.elapsed().as_secs().saturating_add(1), Ordering::Relaxed);
}

/// Whether this process met a loan in a command's way lately.
pub(crate) fn seen_lately() -> bool {
    let at = SEEN.load(Ordering::Relaxed);
    let epoch = EPOCH.get_or_init(Instant::now);
    at > 0 && epoch.elapsed().as_secs() < at.saturating_add(SEEN_FOR.as_secs())
}

/// After `events` are applied in `tx`: cuts short the loans they stand in
/// the way of, recording the cuts with `meta`.
pub(crate) async fn after_writes(
    tx: &impl GenericClient,
    meta: &EventMeta,
    events: &[&Event],
) -> Result<(), StoreError> {
    let providers: Vec<Uuid> = taken_on(events).into_iter().collect();
    if providers.is_empty() {
        return Ok(());
    }
    let at = now(tx).await?;
    let lent_on: Vec<Uuid> =
        tx.query(books::LENT_ON, &[&providers, &at]).await?.iter().map(|r| r.get("provider_uuid")).collect();
    if lent_on.is_empty() {
        return Ok(());
    }
    let cuts = cuts(tx, &lent_on, at).await?;
    if cuts.is_empty() {
        return Ok(());
    }
    let events: Vec<Event> = cuts.into_iter().map(|(consumer, until)| Event::LoanCut { consumer, until, at }).collect();
    let refs: Vec<&Event> = events.iter().collect();
    crate::log::append(tx, meta, &events).await?;
    crate::projection::apply_all(tx, &refs).await?;
    Ok(())
}

/// Each loan to cut on `providers`, with its new end (the earliest any of
/// its holds needs).
async fn cuts(
    tx: &impl GenericClient,
    providers: &[Uuid],
    at: DateTime<Utc>,
) -> Result<BTreeMap<Uuid, DateTime<Utc>>, StoreError> {
    let (books, inventories) = books::read(tx, providers, at).await?;
    let mut out: BTreeMap<Uuid, DateTime<Utc>> = BTreeMap::new();
    for (key, b) in &books {
        if b.loans.is_empty() {
            continue;
        }
        let capacity = inventories.get(key).map(|i| i.capacity()).unwrap_or(0);
        for (consumer, until) in lend::cuts(capacity, &b.ordinary, &b.lendable, &b.loans, at) {
            let end = out.entry(consumer).or_insert(until);
            *end = (*end).min(until);
        }
    }
    Ok(out)
}
