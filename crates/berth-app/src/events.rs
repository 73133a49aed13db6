//! Lease events as operators watch and steer them: the lists (a
//! project's, or one lease's), an operator's control over one event
//! (retry, cancel, fire), and pausing or resuming every manager. Each
//! control is recorded with who did it and the rule it acted under.

pub use berth_core::lease_event::Control;
pub use berth_store::queries::lease_events::{LeaseEventFilter, LeaseEventRow};
pub use berth_store::queries::manager::ManagerState;
use uuid::Uuid;

use crate::{Allowed, App, Caller, Error, Owner, Rule};

/// The lease event use cases, over one [`App`].
pub struct Events<'a> {
    app: &'a App,
}

impl Events<'_> {
    /// Which project's events a list shows, `asked` being the project a
    /// caller names (only those who see every project's may name another).
    pub fn list_scope(&self, caller: &Caller<'_>, asked: Option<&str>) -> Result<Option<String>, Error> {
        match (asked, caller.visible_project(Rule::EventsAllProjects)) {
            (Some(p), None) => Ok(Some(p.to_string())),
            (None, None) => Ok(None),
            (Some(p), Some(own)) if p != own => Err(Error::Forbidden),
            (_, Some(own)) => Ok(Some(own.to_string())),
        }
    }

    /// Whether the caller may list the events of the lease `id`: not found
    /// unless it sees the lease.
    pub async fn of_lease(&self, caller: &Caller<'_>, id: Uuid) -> Result<Allowed, Error> {
        let lease = self.app.store.lease(id, caller.visible_project(Rule::LeasesGetAllProjects)).await?;
        let owner = Owner::Owned { project: &lease.record.project_id, user: &lease.record.user_id };
        caller.authorize(Rule::EventsList, owner)?;
        Ok(Allowed(Rule::EventsList))
    }

    /// The events `filter` selects (its project decided by
    /// [`Events::list_scope`], or its lease by [`Events::of_lease`]).
    pub async fn page(&self, a: Allowed, filter: &LeaseEventFilter) -> Result<Vec<LeaseEventRow>, Error> {
        debug_assert_eq!(a.0, Rule::EventsList);
        Ok(self.app.store.lease_events(filter).await?)
    }

    /// An operator's control over the lease event `id`: not found unless
    /// the caller sees its lease, then the control's rule; the event after.
    pub async fn control(&self, caller: &Caller<'_>, id: Uuid, which: Control) -> Result<LeaseEventRow, Error> {
        let rule = match which {
            Control::Retry => Rule::EventsRetry,
            Control::Cancel => Rule::EventsCancel,
            Control::Fire => Rule::EventsFire,
        };
        let event = self.app.store.lease_event(id, caller.visible_project(Rule::EventsAllProjects)).await?;
        caller.authorize(rule, Owner::Project(&event.project_id))?;
        let meta = caller.meta(Some(caller.gate.name(rule)));
        Ok(self.app.store.control_lease_event(&meta, id, which).await?)
    }

    /// The managers: paused or not and who said so, replicas, counts.
    pub async fn manager(&self, caller: &Caller<'_>) -> Result<ManagerState, Error> {
        caller.authorize(Rule::ManagerGet, Owner::Caller)?;
        Ok(self.app.store.manager_state().await?)
    }

    /// Pauses or resumes every manager; the managers after.
    pub async fn pause(&self, caller: &Caller<'_>, a: Allowed, paused: bool) -> Result<ManagerState, Error> {
        debug_assert_eq!(a.0, Rule::ManagerUpdate);
        let meta = caller.meta(Some(caller.gate.name(Rule::ManagerUpdate)));
        self.app.store.set_manager_paused(&meta, paused, caller.user_id, caller.project_id).await?;
        Ok(self.app.store.manager_state().await?)
    }
}

impl App {
    /// The lease event use cases.
    pub fn events(&self) -> Events<'_> {
        Events { app: self }
    }
}
