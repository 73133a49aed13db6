//! Lending idle capacity to preemptible consumers (`berth_core::lend`). A
//! Placement claim whose `consumer_type` is PREEMPTIBLE is lent, not
//! allocated: its holds go to `loan_allocations`, which no other command's
//! capacity check reads, each until the first instant it would stand in an
//! owner's way, less the reclaim lead (here). A command that takes capacity
//! a loan sits on cuts the loan short in its own transaction (cut.rs). The
//! manager reclaims the loans due through the plugins (reclaim.rs).

pub(crate) mod books;
mod cut;
mod reclaim;

use std::collections::BTreeMap;

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::event::Allocation;
use berth_core::lease::reservation_of_class;
use berth_core::{lend, Error, Event, EventMeta, Window};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

pub(crate) use cut::{after_writes, providers_taken, seen, seen_lately, IN_THE_WAY, NO_LOANS_ON};
pub use reclaim::Reclaim;

use super::{now, record};
use crate::client::GenericClient;
use crate::commands::{ConsumerAllocations, GenerationCheck};
use crate::lock::{self, Sorted};
use crate::refuse;
use crate::{Store, StoreError};

impl Store {
    /// Lends `request` (one preemptible consumer's allocations from now on)
    /// what is idle, or refuses it whole; with no allocations, gives its
    /// loan back.
    pub(crate) async fn lend(&self, meta: &EventMeta, request: ConsumerAllocations) -> Result<(), Error> {
        if request.allocations.iter().any(|a| reservation_of_class(&a.resource_class).is_some()) {
            let detail = "a preemptible consumer draws from no reservation: it borrows what is idle";
            return Err(Error::invalid(ErrorCode::LendInvalid, detail));
        }
        let lead = self.reclaim_lead;
        crate::tx::command!(self, |tx| { lend(tx, meta, &request, lead).await })
    }
}

async fn lend(
    tx: &impl GenericClient,
    meta: &EventMeta,
    request: &ConsumerAllocations,
    lead: Duration,
) -> Result<(), StoreError> {
    let ids: Sorted<Uuid> = [request.consumer].into_iter().collect();
    let held: Vec<lock::ConsumerHolding> =
        tx.query(lock::CONSUMERS_HOLDING, &[ids.param()]).await?.iter().map(lock::ConsumerHolding::from_row).collect();
    if held.iter().any(|h| h.provider.is_some()) {
        let detail = format!("consumer {} holds ordinary allocations: delete them before it borrows", request.consumer);
        return Err(Error::conflict(ErrorCode::LoanKind, detail).into());
    }
    check_generation(held.first().map(|h| h.generation), request.generation)?;
    let at = now(tx).await?;
    if request.allocations.is_empty() {
        if !held.is_empty() {
            record(tx, meta, &[Event::LoanReturned { consumer: request.consumer, at }]).await?;
        }
        return Ok(());
    }
    let providers: Sorted<Uuid> = request.allocations.iter().map(|a| a.provider).collect();
    let locked = lock::providers(tx, &providers[..]).await?;
    if let Some(missing) = &providers[..].iter().find(|p| !locked.iter().any(|l| l.uuid == **p)) {
        return Err(refuse::no_provider(**missing).into());
    }
    let until = idle_until(tx, request, &providers[..], at, lead).await?;
    let window = Window { start: at, end: until };
    let allocations = request
        .allocations
        .iter()
        .map(|a| Allocation { provider: a.provider, resource_class: a.resource_class.clone(), used: a.used, window })
        .collect();
    let event = Event::CapacityLent {
        consumer: request.consumer,
        project_id: request.project_id.clone(),
        user_id: request.user_id.clone(),
        allocations,
        until,
        lead_s: lead.num_seconds(),
        at,
    };
    record(tx, meta, &[event]).await?;
    Ok(())
}

/// The generation the client sent, against the consumer's (`None`: new).
fn check_generation(actual: Option<i64>, given: GenerationCheck) -> Result<(), Error> {
    let given = match given {
        GenerationCheck::Any => return Ok(()),
        GenerationCheck::New => None,
        GenerationCheck::Exactly(g) => Some(g),
    };
    if actual != given {
        return Err(refuse::generation(Refusal::ConsumerGeneration { current: actual, given, made: false }));
    }
    Ok(())
}

/// Until when every hold of `request` may be lent from `at` (`None`: no
/// owner needs any of it); refused when some hold is not idle now for at
/// least the lead.
async fn idle_until(
    tx: &impl GenericClient,
    request: &ConsumerAllocations,
    providers: &[Uuid],
    at: DateTime<Utc>,
    lead: Duration,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let (books, inventories) = books::read(tx, providers, at).await?;
    let mut wanted: BTreeMap<books::Key, i64> = BTreeMap::new();
    for a in &request.allocations {
        *wanted.entry((a.provider, a.resource_class.clone())).or_default() += a.used;
    }
    let mut until: Option<DateTime<Utc>> = None;
    for ((provider, class), amount) in wanted {
        let key = (provider, class.clone());
        let Some(inv) = inventories.get(&key) else {
            let known = tx.query_opt("SELECT 1 FROM resource_classes WHERE name = $1", &[&class]).await?.is_some();
            if !known {
                return Err(refuse::no_class(&class).into());
            }
            return Err(refuse::capacity(Refusal::NoInventoryFor { provider, class }).into());
        };
        if inv.check_amount(&provider.to_string(), &class, amount).is_err() {
            return Err(refuse::capacity(Refusal::AmountOutsideInventory { provider, class }).into());
        }
        let b = books.get(&key);
        let ordinary = b.map(|b| b.ordinary.as_slice()).unwrap_or_default();
        let lendable = b.map(|b| b.lendable.as_slice()).unwrap_or_default();
        let lent: Vec<(Window, i64)> = b
            .into_iter()
            .flat_map(|b| b.loans.iter())
            .filter(|l| l.key != request.consumer)
            .map(|l| (l.window, l.used))
            .collect();
        match lend::lend_until(inv.capacity(), ordinary, lendable, &lent, amount, at, lead) {
            Ok(None) => {}
            Ok(Some(t)) => until = Some(until.map_or(t, |u| u.min(t))),
            Err(()) => {
                let detail = format!(
                    "{amount} {class} on resource provider {provider} is not idle now for at least the reclaim lead ({}s)",
                    lead.num_seconds()
                );
                return Err(Error::new(ErrorKind::Conflict, ErrorCode::NoIdleCapacity, detail).into());
            }
        }
    }
    Ok(until)
}
