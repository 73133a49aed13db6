//! Operators' controls over the manager: retry, cancel or fire one lease
//! event, and pause or resume every manager of the deployment.

use berth_core::lease::LeaseEventStatus;
use berth_core::lease_event::{codes, Control};
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use crate::commands::{now, record};
use crate::{lock, Store};

fn not_found(id: Uuid) -> Error {
    Error::not_found(codes::EVENT_NOT_FOUND, format!("lease event {id} could not be found"))
}

impl Store {
    /// Retries, cancels or fires lease event `id`, when its status allows.
    pub async fn control_lease_event(&self, meta: &EventMeta, id: Uuid, control: Control) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            // A lease event never changes lease; its lease is locked first.
            let lease: Uuid = match tx.query_opt("SELECT lease_id FROM lease_events WHERE id = $1", &[&id]).await? {
                Some(r) => r.get(0),
                None => return Err(not_found(id).into()),
            };
            lock::lease(tx, lease).await?;
            let Some(status) = lock::lease_event(tx, lease, id).await? else {
                return Err(not_found(id).into());
            };
            control.check(id, LeaseEventStatus::parse(&status).unwrap_or(LeaseEventStatus::Error))?;
            let at = now(tx).await?;
            let event = match control {
                Control::Retry => Event::LeaseEventRetried { lease, event: id, at },
                Control::Cancel => Event::LeaseEventCancelled { lease, event: id, at },
                Control::Fire => Event::LeaseEventFired { lease, event: id, at },
            };
            record(tx, meta, &[event]).await?;
            Ok(())
        })
    }

    /// Pauses (or resumes) every manager sharing this database, as
    /// `user_id` of `project_id`. Once a pause commits no manager claims
    /// another event; running hooks finish. Setting what is already set
    /// records nothing.
    pub async fn set_manager_paused(
        &self,
        meta: &EventMeta,
        paused: bool,
        user_id: &str,
        project_id: &str,
    ) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            if lock::manager_state(tx).await? == paused {
                return Ok(());
            }
            let at = now(tx).await?;
            let (user_id, project_id) = (user_id.to_string(), project_id.to_string());
            let event = if paused {
                Event::ManagerPaused { user_id, project_id, at }
            } else {
                Event::ManagerResumed { user_id, project_id, at }
            };
            record(tx, meta, &[event]).await?;
            Ok(())
        })
    }
}
