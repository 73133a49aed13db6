//! Pausing and resuming every manager of the deployment (the controls
//! over one lease event are lease commands: `commands/leases/control.rs`).

use berth_core::{Error, Event, EventMeta};

use crate::commands::{now, record};
use crate::{lock, Store};

impl Store {
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
