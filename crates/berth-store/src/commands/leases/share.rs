//! Sharing a lease with other projects: the whole list replaced at once.
//!
//! The command locks the lease, its start event (a manager's claim of the
//! start skips it meanwhile, then reads the hook context after us: the
//! start's hooks carry the new list) and its slots (a draw decided under
//! them sees the list as it is after us). A started lease owes each
//! reservation's plugin an `on_update` call, which the manager makes.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::lease::{LeaseEventStatus, LeaseEventType, LeaseStatus};
use berth_core::share::{check_projects, check_shareable};
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use super::lock_lease;
use crate::commands::{now, record};
use crate::{lock, Store};

impl Store {
    /// Shares lease `id` (if `project`, None: admin, may see it) with
    /// `projects` instead of whom it was shared with; answers the list as
    /// it now stands, sorted. The same list again changes nothing.
    pub async fn share_lease(
        &self,
        meta: &EventMeta,
        id: Uuid,
        project: Option<&str>,
        projects: &[String],
    ) -> Result<Vec<String>, Error> {
        crate::tx::command!(self, |tx| {
            let current = lock_lease(tx, id, project).await?;
            let lease = &current.record;
            check_projects(&lease.project_id, projects)?;
            let ended = lease.event(LeaseEventType::EndLease).is_some_and(|e| e.status != LeaseEventStatus::Undone);
            check_shareable(id, if ended { LeaseStatus::Terminated } else { lease.status })?;
            let started = match lease.event(LeaseEventType::StartLease) {
                Some(e) => lock::lease_event(tx, id, e.id)
                    .await?
                    .and_then(|s| LeaseEventStatus::parse(&s))
                    .is_some_and(|s| matches!(s, LeaseEventStatus::InProgress | LeaseEventStatus::Done)),
                None => false,
            };
            let slots: Vec<Uuid> = lease.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
            lock::consumers(tx, &slots).await?;
            let wanted: Vec<String> = projects.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect();
            if wanted == current.shared_with {
                return Ok(wanted);
            }
            let hooks: BTreeMap<Uuid, Uuid> = if started {
                lease.reservations.iter().map(|r| (r.id, Uuid::new_v4())).collect()
            } else {
                BTreeMap::new()
            };
            let at = now(tx).await?;
            record(tx, meta, &[Event::LeaseShared { id, projects: wanted.clone(), hooks, at }]).await?;
            Ok(wanted)
        })
    }
}
