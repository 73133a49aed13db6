//! The lease use cases: create (with its idempotency key, recurrence and
//! dry run, [`create`]), update ([`update`]), show, list, delete, and the
//! operators' controls (end now, recover from ERROR), sharing ([`share`]). Reading a lease's
//! dates and reservations is [`parse`], recurrence [`recurrence`], the
//! check of the instances a reservation names [`instances`]; splitting a
//! lease and handing it to another project [`transfer`].

mod create;
mod instances;
mod offered;
mod parse;
mod recurrence;
mod request;
mod share;
mod transfer;
mod update;

use berth_core::error::ErrorCode;
pub use berth_core::lease::LeaseStatus;
pub use berth_store::commands::RequestKey;
pub use berth_store::queries::leases::{Lease, LeaseFilter, LeaseKey, TransferOffer};
use uuid::Uuid;

use crate::{App, Caller, Error, Owner, Rule};
pub use create::{Created, MayCreate};
pub use request::{CreateLease, LeaseChange, NewReservation, Occurrence, Recurrence, ReservationChange};
pub use transfer::{Consent, SplitRequest, TransferRequest, Transferred};
pub use update::Changing;

/// The lease use cases, over one [`App`].
pub struct Leases<'a> {
    pub(crate) app: &'a App,
}

fn owner(lease: &Lease) -> Owner<'_> {
    Owner::Owned { project: &lease.record.project_id, user: &lease.record.user_id }
}

/// The lease a caller names, found only among those it sees (404 else),
/// then `rule` asked of it.
async fn find<'l>(l: &Leases<'l>, caller: &Caller<'_>, id: Uuid, rule: Rule) -> Result<Lease, Error> {
    let lease = l.app.store.lease(id, l.scope(caller)).await?;
    caller.authorize(rule, owner(&lease))?;
    Ok(lease)
}

/// An operator's control over a whole lease.
#[derive(Debug, Clone, Copy)]
pub enum Control {
    /// End a started lease now; its end runs through the plugins as any end.
    End,
    /// Take it out of ERROR once the world is fixed.
    Recover,
}

impl Leases<'_> {
    /// The project whose leases the caller sees (`None`: every project's).
    fn scope<'c>(&self, caller: &'c Caller<'_>) -> Option<&'c str> {
        caller.visible_project(Rule::LeasesGetAllProjects)
    }

    /// The lease `id`, as the caller may see it.
    pub async fn show(&self, caller: &Caller<'_>, id: Uuid) -> Result<Lease, Error> {
        find(self, caller, id, Rule::LeasesGet).await
    }

    /// Which project's leases a list shows, `asked` being the project a
    /// caller names (only those who see every project's may name another).
    pub fn list_scope(&self, caller: &Caller<'_>, asked: Option<&str>) -> Result<Option<String>, Error> {
        caller.authorize(Rule::LeasesList, Owner::Caller)?;
        match (asked, self.scope(caller)) {
            (Some(p), None) => Ok(Some(p.to_string())),
            (None, None) => Ok(None),
            (Some(p), Some(own)) if p != own => Err(Error::Forbidden),
            (_, Some(own)) => Ok(Some(own.to_string())),
        }
    }

    /// Where a page starts: after the lease `marker`, in `project`'s.
    pub async fn marker(&self, marker: Uuid, project: Option<&str>) -> Result<LeaseKey, Error> {
        Ok(self.app.store.lease_key(marker, project).await?)
    }

    /// The leases `filter` (its project decided by [`Leases::list_scope`]) selects.
    pub async fn page(&self, filter: &LeaseFilter) -> Result<Vec<Lease>, berth_core::Error> {
        self.app.store.leases(filter).await
    }

    /// The reservations `list` asks for, each checked by its plugin (as a
    /// lease's would be), for a question that books nothing.
    pub async fn resolve(
        &self,
        list: Vec<NewReservation>,
    ) -> Result<Vec<berth_store::commands::NewReservation>, Error> {
        parse::reservations(&self.app.plugins, list).await
    }

    /// Deletes the lease `id`: what it held is free at once, and the
    /// policy service is told.
    pub async fn delete(&self, caller: &Caller<'_>, id: Uuid) -> Result<(), Error> {
        let lease = find(self, caller, id, Rule::LeasesDelete).await?;
        self.app.store.delete_lease(&caller.meta(None), id, self.scope(caller)).await?;
        self.ended(&crate::policy::values_of(&lease.record)).await;
        Ok(())
    }

    /// A lease ended, deleted by a caller or its end event done (the
    /// manager): the policy service is told.
    pub async fn ended(&self, lease: &crate::policy::LeaseValues) {
        crate::policy::on_end(&self.app.policy, lease).await;
    }

    /// An operator's control over the lease `id`: not found unless the
    /// caller may see it, then the control's rule, then the command; the
    /// lease as it is after.
    pub async fn control(&self, caller: &Caller<'_>, id: Uuid, which: Control) -> Result<Lease, Error> {
        let rule = match which {
            Control::End => Rule::LeasesEnd,
            Control::Recover => Rule::LeasesRecover,
        };
        find(self, caller, id, rule).await?;
        let meta = caller.meta(Some(caller.gate.name(rule)));
        let scope = self.scope(caller);
        match which {
            Control::End => self.app.store.end_lease(&meta, id, scope).await?,
            Control::Recover => self.app.store.recover_lease(&meta, id, scope).await?,
        }
        Ok(self.app.store.lease(id, None).await?)
    }
}

/// A refusal of the lease's body.
fn invalid(detail: impl Into<String>) -> Error {
    Error::Domain(berth_core::Error::invalid(ErrorCode::InvalidLease, detail))
}
