//! Creating a lease: one per occurrence when recurring; a dry run books
//! nothing and answers each occurrence with whether it fits; a request
//! key makes a retried create answer what the first one made.

use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_store::commands::{Keyed, LeaseDates, NewLease};

use super::parse::{date_field, fixed_date, reservations};
use super::recurrence::{dry_run, occurrences, zone_of};
use super::request::{CreateLease, Occurrence};
use super::{instances, Lease, Leases};
use crate::{policy, Caller, Error, Owner, Rule};

/// What a create made.
pub enum Created {
    /// A dry run: the occurrences.
    DryRun(Vec<Occurrence>),
    /// The leases (one per occurrence), and whether an earlier request
    /// with the same key made them.
    Made { leases: Vec<Lease>, replayed: bool },
}

/// The caller may create a lease (asked before its body is read).
pub struct MayCreate(());

impl Leases<'_> {
    /// Whether the caller may create leases at all.
    pub fn may_create(&self, caller: &Caller<'_>) -> Result<MayCreate, Error> {
        caller.authorize(Rule::LeasesCreate, Owner::Caller)?;
        Ok(MayCreate(()))
    }

    /// Creates the lease `asked`: every reservation fits at every instant,
    /// or none is taken.
    pub async fn create(&self, caller: &Caller<'_>, _: MayCreate, asked: CreateLease) -> Result<Created, Error> {
        if let Some(offer) = &asked.offer {
            return self.book(caller, offer, asked.name, asked.key).await;
        }
        let start = date_field("start_date", asked.start_date.as_deref())?.unwrap_or(DateSpec::Now);
        let reservations = reservations(&self.app.plugins, asked.reservations).await?;
        // The database's time, for what must be resolved before the command
        // (occurrences, the policy service's view); the command resolves
        // `start_date: now` and checks "in the past" again in its transaction.
        let now = self.app.store.now().await?;
        let dates = match &asked.recurrence {
            Some(rec) => LeaseDates::Recurring {
                occurrences: occurrences(rec, start.resolve(now), asked.max_occurrences)?,
                time_zone: zone_of(rec)?.map(|z| z.name().to_string()),
            },
            None => {
                let Some(end) = date_field("end_date", asked.end_date.as_deref())? else {
                    return Err(berth_core::Error::invalid(ErrorCode::InvalidDate, "end_date is required").into());
                };
                let before_end = fixed_date("before_end_date", asked.before_end_date.as_deref(), now)?;
                LeaseDates::One { start, end, before_end }
            }
        };
        instances::check(self.app, caller, &reservations).await?;
        let (project_id, user_id) = (caller.project_id.to_string(), caller.user_id.to_string());
        let new = NewLease { name: asked.name, project_id, user_id, dates, reservations };
        policy::check_create(&self.app.policy, &new, now).await?;
        if asked.dry_run {
            return Ok(Created::DryRun(dry_run(&self.app.store, &new, now).await?));
        }
        let meta = caller.meta(None);
        let Some(key) = asked.key else {
            return Ok(Created::Made { leases: self.app.store.create_lease(&meta, new).await?, replayed: false });
        };
        match self.app.store.create_lease_keyed(&meta, new, &key).await? {
            Keyed::Made(leases) => Ok(Created::Made { leases, replayed: false }),
            Keyed::Earlier(leases) if leases.is_empty() => Err(berth_core::Error::not_found(
                ErrorCode::LeaseNotFound,
                format!("the leases made with Idempotency-Key {} have since been deleted", key.key),
            )
            .into()),
            Keyed::Earlier(leases) => Ok(Created::Made { leases, replayed: true }),
        }
    }
}
