//! Changing a lease: rename, move, extend, shorten, or change its
//! reservations; the result is re-checked as a whole.

use berth_core::dates::DateSpec;
use berth_store::commands::LeaseUpdate;
use uuid::Uuid;

use super::parse::{date_field, fixed_date, reservation_changes, shifted};
use super::request::LeaseChange;
use super::{find, invalid, owner, Lease, Leases};
use crate::{policy, Caller, Error, Rule};

/// A lease the caller sees and may change (found before its change is read).
pub struct Changing(Lease);

impl Leases<'_> {
    /// The lease `id`, if the caller may change it.
    pub async fn changing(&self, caller: &Caller<'_>, id: Uuid) -> Result<Changing, Error> {
        Ok(Changing(find(self, caller, id, Rule::LeasesUpdate).await?))
    }

    /// Changes the lease; the lease as it is after.
    pub async fn update(&self, caller: &Caller<'_>, current: Changing, asked: LeaseChange) -> Result<Lease, Error> {
        let Changing(current) = current;
        let r = &current.record;
        let mut end = date_field("end_date", asked.end_date.as_deref())?;
        let later = [("prolong_for", &asked.prolong_for), ("reduce_by", &asked.reduce_by)];
        if let Some(e) = shifted("end_date", later, r.end)? {
            if end.is_some() {
                return Err(invalid("end_date and a relative move of it conflict"));
            }
            end = Some(e);
        }
        let mut start = date_field("start_date", asked.start_date.as_deref())?;
        let moved = [("defer_by", &asked.defer_by), ("advance_by", &asked.advance_by)];
        if let Some(s) = shifted("start_date", moved, r.start)? {
            if start.is_some() {
                return Err(invalid("start_date and a relative move of it conflict"));
            }
            start = Some(s);
        }
        let reservations = reservation_changes(self.app, caller, &current, asked.reservations).await?;
        let now = self.app.store.now().await?;
        let before_end = fixed_date("before_end_date", asked.before_end_date.as_deref(), now)?;
        let update = LeaseUpdate { name: asked.name, start, end, before_end, reservations };
        if update.name.is_none()
            && update.start.is_none()
            && update.end.is_none()
            && update.before_end.is_none()
            && update.reservations.is_empty()
        {
            return Err(invalid("nothing to update"));
        }
        if matches!(update.end, Some(DateSpec::At(t)) if t > r.end) {
            caller.authorize(Rule::LeasesExtend, owner(&current))?;
        }
        policy::check_update(&self.app.policy, &current, &update, now).await?;
        let id = r.id;
        self.app.store.update_lease(&caller.meta(None), id, self.scope(caller), update).await?;
        Ok(self.app.store.lease(id, None).await?)
    }
}
