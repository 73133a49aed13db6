//! Operators' controls over a lease: retry, cancel or fire one of its
//! lease events, end it now (its end runs through the plugins as a normal
//! end), and take it out of ERROR once the world is fixed.
//!
//! Firing a start whose time is ahead moves the lease's start to now (so
//! an ACTIVE lease's window has always begun; refused if what it holds is
//! not free now), and firing an end ends the lease now, as `end_lease`.

use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_core::lease::{LeaseEventStatus, LeaseEventType, LeaseRecord};
use berth_core::lease_event::{self, Control};
use berth_core::{Error, Event, EventMeta};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::update::update_locked;
use super::{lock_lease, LeaseUpdate};
use crate::commands::{now, record};
use crate::queries::lease_events::{lease_event_on, LeaseEventRow};
use crate::{lock, Store, StoreError};

fn event_not_found(id: Uuid) -> Error {
    Error::not_found(ErrorCode::LeaseEventNotFound, format!("lease event {id} could not be found"))
}

/// Refuses to end a lease that has not started, or whose end has run.
fn check_endable(current: &LeaseRecord, at: DateTime<Utc>) -> Result<(), Error> {
    let id = current.id;
    // A window not yet begun (its start cancelled, say) has nothing to end.
    if !current.has_started(at) || current.start > at {
        return Err(Error::conflict(
            ErrorCode::LeaseNotStarted,
            format!("lease {id} has not started: delete it instead of ending it"),
        ));
    }
    if current.event(LeaseEventType::EndLease).is_some_and(|e| e.status != LeaseEventStatus::Undone) {
        return Err(Error::conflict(ErrorCode::LeaseEnded, format!("lease {id} has ended: its end event has run")));
    }
    Ok(())
}

/// What firing `event_type` now does to the lease's window: a start ahead
/// moves to now, an end ahead moves to now.
async fn fire_window(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    current: LeaseRecord,
    event_type: LeaseEventType,
    at: DateTime<Utc>,
    cleaning: chrono::Duration,
) -> Result<(), StoreError> {
    let update = match event_type {
        LeaseEventType::StartLease if current.start > at => {
            LeaseUpdate { start: Some(DateSpec::At(at)), ..LeaseUpdate::default() }
        }
        LeaseEventType::EndLease => {
            check_endable(&current, at)?;
            LeaseUpdate { end: Some(DateSpec::At(at)), ..LeaseUpdate::default() }
        }
        _ => return Ok(()),
    };
    update_locked(tx, meta, current, &update, at, cleaning).await
}

impl Store {
    /// Retries, cancels or fires lease event `id`, when its status allows;
    /// answers the event as the control left it.
    pub async fn control_lease_event(
        &self,
        meta: &EventMeta,
        id: Uuid,
        control: Control,
    ) -> Result<LeaseEventRow, Error> {
        crate::tx::command!(self, |tx| {
            // A lease event never changes lease; its lease is locked first.
            let lease: Uuid = match tx.query_opt("SELECT lease_id FROM lease_events WHERE id = $1", &[&id]).await? {
                Some(r) => r.get("lease_id"),
                None => return Err(event_not_found(id).into()),
            };
            let current = lock_lease(tx, lease, None).await?.record;
            let Some(status) = lock::lease_event(tx, lease, id).await? else {
                return Err(event_not_found(id).into());
            };
            control.check(id, LeaseEventStatus::parse(&status).unwrap_or(LeaseEventStatus::Error))?;
            let at = now(tx).await?;
            let event = match control {
                Control::Retry => Event::LeaseEventRetried { lease, event: id, at },
                Control::Cancel => Event::LeaseEventCancelled { lease, event: id, at },
                Control::Fire => {
                    let event_type = current.events.iter().find(|e| e.id == id).map(|e| e.event_type);
                    if let Some(t) = event_type {
                        fire_window(tx, meta, current, t, at, self.cleaning_time()).await?;
                    }
                    Event::LeaseEventFired { lease, event: id, at }
                }
            };
            record(tx, meta, &[event]).await?;
            // Read before the commit: once committed, a manager may claim
            // it at once, and the caller asked what the control did.
            lease_event_on(&**tx, id, None).await?.ok_or_else(|| event_not_found(id).into())
        })
    }

    /// Ends a started lease now: its end moves to now (its slots' holds
    /// end there), and its end (and before-end) lease events fall due, for
    /// the manager to fire as it fires any end.
    pub async fn end_lease(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let current = lock_lease(tx, id, project).await?.record;
            // Read once the lease is ours: what changed it meanwhile is older.
            let at = now(tx).await?;
            check_endable(&current, at)?;
            let update = LeaseUpdate { end: Some(DateSpec::At(at)), ..LeaseUpdate::default() };
            update_locked(tx, meta, current, &update, at, self.cleaning_time()).await
        })
    }

    /// Takes a lease out of ERROR (`lease_event::recovered` says where to).
    pub async fn recover_lease(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            // The lease's lock keeps the manager off its events meanwhile.
            let current = lock_lease(tx, id, project).await?.record;
            let at = now(tx).await?;
            let (status, reservation_status) = lease_event::recovered(&current)?;
            let reservations = current.reservations.iter().map(|r| (r.id, reservation_status)).collect();
            record(tx, meta, &[Event::LeaseRecovered { id, status, reservations, at }]).await?;
            Ok(())
        })
    }
}
