//! Splitting a lease not yet started: some of its slots move into a new
//! lease with the same window (`berth_core::lease::split` decides which and
//! how the parameters shrink). The slots keep their consumers and holds, so
//! no capacity moves; into another project, their holds change project and
//! that project's quotas are checked over the window under its guard. Lock
//! order: the lease, the new lease's project's guard, the moved slots.

use std::collections::HashMap;

use berth_core::lease::split::{self, SplitInto, SplitPart};
use berth_core::lease::{self, LeaseRecord};
use berth_core::{Error, Event, EventMeta};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::transfer::{check_not_started, handed_over, lock_slots};
use super::{check_name_free, lock_lease};
use crate::commands::{now, record};
use crate::queries::leases::{load_leases, Lease};
use crate::{quota, Store, StoreError};

/// A split as asked.
#[derive(Debug, Clone)]
pub struct SplitAsk {
    /// The new lease's name.
    pub name: String,
    pub parts: Vec<SplitPart>,
    /// The new lease's project: the original's, or another an admin names.
    pub project_id: String,
    /// Offered at once to this project (a member's split towards another).
    pub offer_to: Option<String>,
    /// Who offers it, for the offer.
    pub offered_by: String,
}

/// The names of the providers `lease`'s slots hold, for hosts named so.
async fn provider_names(tx: &Transaction<'_>, lease: &LeaseRecord) -> Result<HashMap<Uuid, String>, StoreError> {
    let ids: Vec<Uuid> = lease.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.provider)).collect();
    let rows = tx.query("SELECT uuid, name FROM providers WHERE uuid = ANY($1)", &[&ids]).await?;
    Ok(rows.iter().map(|r| (r.get("uuid"), r.get("name"))).collect())
}

/// The events of the split of `current` (locked, not started) at `at`.
async fn split_events(
    tx: &Transaction<'_>,
    current: &LeaseRecord,
    ask: &SplitAsk,
    at: DateTime<Utc>,
) -> Result<(Uuid, Vec<Event>), StoreError> {
    let names = provider_names(tx, current).await?;
    let into =
        SplitInto { id: Uuid::new_v4(), name: &ask.name, project_id: &ask.project_id, user_id: &current.user_id };
    let split::Split { kept, made, moved } = split::split(current, &ask.parts, &names, &into, at)?;
    let slots: Vec<Uuid> = moved.values().flatten().copied().collect();
    lock_slots(tx, &slots).await?;
    let mut events: Vec<Event> = made
        .reservations
        .iter()
        .map(|r| Event::ResourceClassCreated { name: lease::reservation_class(r.id) })
        .collect();
    let (id, project) = (made.id, made.project_id.clone());
    events.push(Event::LeaseUpdated { lease: kept, at });
    events.push(Event::LeaseSplit { from: current.id, lease: made, moved, at });
    if project != current.project_id {
        events.extend(handed_over(tx, &slots, &project, &current.user_id, at).await?);
    }
    if let Some(to_project) = &ask.offer_to {
        let offered_by = ask.offered_by.clone();
        events.push(Event::LeaseTransferOffered { id, to_project: to_project.clone(), offered_by, at });
    }
    Ok((id, events))
}

impl Store {
    /// Splits lease `id` (of `project`; None: admin) as `ask` says, all or
    /// nothing; the new lease.
    pub async fn split_lease(
        &self,
        meta: &EventMeta,
        id: Uuid,
        project: Option<&str>,
        ask: SplitAsk,
    ) -> Result<Lease, Error> {
        lease::check_name(&ask.name)?;
        crate::tx::command!(self, |tx| {
            let current = lock_lease(tx, id, project).await?.record;
            let at = now(tx).await?;
            check_not_started(&current, at)?;
            if ask.offer_to.as_deref() == Some(ask.project_id.as_str()) {
                let detail = format!("the new lease is already {}'s", ask.project_id);
                return Err(Error::invalid(berth_core::error::ErrorCode::InvalidLease, detail).into());
            }
            // Quota: the new lease's project's guard, before any consumer.
            let guards = quota::lock(tx, std::slice::from_ref(&ask.project_id)).await?;
            check_name_free(tx, &ask.project_id, std::slice::from_ref(&ask.name), None).await?;
            let (made, events) = split_events(tx, &current, &ask, at).await?;
            quota::Check::for_events(at, &events).run(tx, &guards).await?;
            record(tx, meta, &events).await?;
            Ok(load_leases(tx, &[made]).await?.pop().expect("the lease was made"))
        })
    }
}
