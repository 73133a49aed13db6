//! Handing a lease to another project: an offer its project makes, the
//! withdrawal of it, and the move itself (an admin's, or the target
//! project's acceptance of the offer). Only a lease not yet started moves:
//! its slots keep their consumers and holds, which change project, so no
//! capacity moves; the target project's quotas are checked over the
//! lease's window under its guard. Lock order: the lease, the target
//! project's guard, the slots' consumers.

use std::collections::BTreeMap;

use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::event::Allocation;
use berth_core::lease::LeaseRecord;
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::slots::draws_of;
use super::{check_name_free, lock_lease, SLOT_CONSUMER_TYPE};
use crate::commands::{now, record};
use crate::queries::leases::{load_leases, Lease};
use crate::{lock, quota, Store, StoreError};

/// Who moves a lease, and to whom.
#[derive(Debug, Clone)]
pub enum Handover {
    /// An admin: to `to_project`, its user `user_id` (None: the lease's own).
    Admin { to_project: String, user_id: Option<String> },
    /// A member of `project` accepts the offer of the lease to it and
    /// becomes its user; `sees_all`: the caller sees every project's leases.
    Accept { project: String, user_id: String, sees_all: bool },
}

/// No consent: 403.
pub(super) fn no_consent(detail: impl Into<String>) -> Error {
    Error::new(ErrorKind::Forbidden, ErrorCode::TransferNoConsent, detail)
}

/// A started lease stays where it is.
pub(super) fn check_not_started(lease: &LeaseRecord, at: DateTime<Utc>) -> Result<(), Error> {
    if lease.has_started(at) {
        return Err(Error::conflict(
            ErrorCode::LeaseStarted,
            format!("lease {} has started: split or transfer a lease before its start", lease.id),
        ));
    }
    Ok(())
}

/// The events that make `slots` (consumers) hold what they hold now, as
/// `project`'s and `user`'s: the same providers, classes and windows. No
/// provider's generation moves, as no capacity does.
pub(super) async fn handed_over(
    tx: &Transaction<'_>,
    slots: &[Uuid],
    project: &str,
    user: &str,
    at: DateTime<Utc>,
) -> Result<Vec<Event>, StoreError> {
    let rows = tx
        .query(
            "SELECT consumer_uuid, provider_uuid, resource_class, used, lower(during) AS start_at,
                    upper(during) AS end_at
             FROM allocations WHERE consumer_uuid = ANY($1)
             ORDER BY consumer_uuid, ordinal, lower(during), provider_uuid, resource_class",
            &[&slots],
        )
        .await?;
    let mut held: BTreeMap<Uuid, Vec<Allocation>> = slots.iter().map(|s| (*s, Vec::new())).collect();
    for r in &rows {
        held.entry(r.get("consumer_uuid")).or_default().push(Allocation {
            provider: r.get("provider_uuid"),
            resource_class: r.get("resource_class"),
            used: r.get("used"),
            window: Window { start: r.get("start_at"), end: r.get("end_at") },
        });
    }
    Ok(held
        .into_iter()
        .map(|(consumer, allocations)| Event::AllocationsReplaced {
            consumer,
            project_id: project.to_string(),
            user_id: user.to_string(),
            consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
            allocations,
            providers_bumped: Some(Vec::new()),
            at,
        })
        .collect())
}

/// Locks `slots` (after any guard) and refuses when a consumer draws
/// from one: it would stay behind.
pub(super) async fn lock_slots(tx: &Transaction<'_>, slots: &[Uuid]) -> Result<(), StoreError> {
    lock::consumers(tx, slots).await?;
    if let Some((slot, ..)) = draws_of(tx, slots).await?.first() {
        return Err(Error::conflict(ErrorCode::LeaseStarted, format!("slot {slot} is in use by a consumer")).into());
    }
    Ok(())
}

/// Moves `lease` (locked, not started) to `to_project` and `user_id` at `at`.
async fn move_lease(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    lease: &LeaseRecord,
    to_project: &str,
    user_id: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    if lease.project_id == to_project {
        return Err(
            Error::invalid(ErrorCode::InvalidLease, format!("lease {} is already {to_project}'s", lease.id)).into()
        );
    }
    let guards = quota::lock(tx, &[to_project.to_string()]).await?;
    check_name_free(tx, to_project, std::slice::from_ref(&lease.name), None).await?;
    let slots: Vec<Uuid> = lease.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
    lock_slots(tx, &slots).await?;
    let mut events = vec![Event::LeaseTransferred {
        id: lease.id,
        from_project: lease.project_id.clone(),
        to_project: to_project.to_string(),
        user_id: user_id.to_string(),
        at,
    }];
    events.extend(handed_over(tx, &slots, to_project, user_id, at).await?);
    quota::Check::for_events(at, &events).run(tx, &guards).await?;
    record(tx, meta, &events).await?;
    Ok(())
}

/// Whether some lease is offered to `project`.
async fn offered_to(tx: &Transaction<'_>, project: &str) -> Result<bool, StoreError> {
    let found =
        tx.query_opt("SELECT 1 AS found FROM lease_transfers WHERE to_project = $1 LIMIT 1", &[&project]).await?;
    Ok(found.is_some())
}

/// The lease `id`, locked, as `how` may move it: an admin's any; an
/// acceptance only of a lease offered to the caller's project. Else 403
/// where the caller may know the lease exists (it sees it, or awaits some
/// offer), 404 where it may not.
async fn lock_for(tx: &Transaction<'_>, id: Uuid, how: &Handover) -> Result<(Lease, String, String), StoreError> {
    lock::lease(tx, id).await?;
    let lease = load_leases(tx, &[id]).await?.pop();
    let not_found = || Error::not_found(ErrorCode::LeaseNotFound, format!("lease {id} could not be found"));
    match how {
        Handover::Admin { to_project, user_id } => {
            let lease = lease.ok_or_else(not_found)?;
            let user = user_id.clone().unwrap_or_else(|| lease.record.user_id.clone());
            Ok((lease, to_project.clone(), user))
        }
        Handover::Accept { project, user_id, sees_all } => {
            let offered = lease.as_ref().and_then(|l| l.transfer.as_ref()).is_some_and(|t| t.to_project == *project);
            match lease {
                Some(l) if offered => Ok((l, project.clone(), user_id.clone())),
                Some(l) if *sees_all || l.record.project_id == *project => {
                    Err(no_consent(format!("lease {id} is not offered to project {project}")).into())
                }
                _ if offered_to(tx, project).await? => {
                    Err(no_consent(format!("lease {id} is not offered to project {project}")).into())
                }
                _ => Err(not_found().into()),
            }
        }
    }
}

impl Store {
    /// Moves lease `id` to another project now, as `how` says; the lease
    /// as it is after.
    pub async fn transfer_lease(&self, meta: &EventMeta, id: Uuid, how: Handover) -> Result<Lease, Error> {
        crate::tx::command!(self, |tx| {
            let (lease, to_project, user) = lock_for(tx, id, &how).await?;
            let at = now(tx).await?;
            check_not_started(&lease.record, at)?;
            move_lease(tx, meta, &lease.record, &to_project, &user, at).await?;
            Ok(load_leases(tx, &[id]).await?.pop().expect("the lease is locked"))
        })
    }

    /// Offers lease `id` (of `project`; None: admin) to `to_project`,
    /// replacing any earlier offer; the lease as it is after.
    pub async fn offer_transfer(
        &self,
        meta: &EventMeta,
        id: Uuid,
        project: Option<&str>,
        to_project: &str,
        offered_by: &str,
    ) -> Result<Lease, Error> {
        crate::tx::command!(self, |tx| {
            let lease = lock_lease(tx, id, project).await?;
            let at = now(tx).await?;
            check_not_started(&lease.record, at)?;
            if lease.record.project_id == to_project {
                let detail = format!("lease {id} is already {to_project}'s");
                return Err(Error::invalid(ErrorCode::InvalidLease, detail).into());
            }
            let offer = Event::LeaseTransferOffered {
                id,
                to_project: to_project.to_string(),
                offered_by: offered_by.to_string(),
                at,
            };
            record(tx, meta, &[offer]).await?;
            Ok(load_leases(tx, &[id]).await?.pop().expect("the lease is locked"))
        })
    }

    /// Withdraws the offer of lease `id` (of `project`; None: admin).
    pub async fn withdraw_transfer(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let lease = lock_lease(tx, id, project).await?;
            if lease.transfer.is_none() {
                let detail = format!("lease {id} is offered to no project");
                return Err(Error::not_found(ErrorCode::TransferNotFound, detail).into());
            }
            let at = now(tx).await?;
            record(tx, meta, &[Event::LeaseTransferWithdrawn { id, at }]).await?;
            Ok(())
        })
    }
}
