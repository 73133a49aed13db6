//! Operators' controls over a lease: end it now (its end runs through the
//! plugins as a normal end), and take it out of ERROR once the world is
//! fixed.

use berth_core::dates::DateSpec;
use berth_core::lease::{LeaseEventStatus, LeaseEventType};
use berth_core::lease_event::{self, codes};
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use super::update::update_locked;
use super::{lock_lease, LeaseUpdate};
use crate::commands::{now, record};
use crate::Store;

impl Store {
    /// Ends a started lease now: its end moves to now (its slots' holds
    /// end there), and its end (and before-end) lease events fall due, for
    /// the manager to fire as it fires any end.
    pub async fn end_lease(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let current = lock_lease(tx, id, project).await?.record;
            if !current.has_started(at) {
                return Err(Error::conflict(
                    codes::LEASE_NOT_STARTED,
                    format!("lease {id} has not started: delete it instead of ending it"),
                )
                .into());
            }
            if current.event(LeaseEventType::EndLease).is_some_and(|e| e.status != LeaseEventStatus::Undone) {
                return Err(Error::conflict(
                    berth_core::lease::codes::LEASE_ENDED,
                    format!("lease {id} has ended: its end event has run"),
                )
                .into());
            }
            let update = LeaseUpdate { end: Some(DateSpec::At(at)), ..LeaseUpdate::default() };
            update_locked(tx, meta, current, &update, at).await
        })
    }

    /// Takes a lease out of ERROR (`lease_event::recovered` says where to).
    pub async fn recover_lease(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            // The lease's lock keeps the manager off its events meanwhile.
            let current = lock_lease(tx, id, project).await?.record;
            let (status, reservation_status) = lease_event::recovered(&current)?;
            let reservations = current.reservations.iter().map(|r| (r.id, reservation_status)).collect();
            record(tx, meta, &[Event::LeaseRecovered { id, status, reservations, at }]).await?;
            Ok(())
        })
    }
}
