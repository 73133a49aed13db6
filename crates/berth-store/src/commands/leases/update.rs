//! Updating a lease: rename, move and re-size it; everything that changes is
//! re-checked over the new window, all or nothing.

use std::collections::{BTreeMap, HashMap};

use berth_core::error::ErrorCode;
use berth_core::lease::{self, LeaseChange, LeaseEventStatus, LeaseEventType, LeaseRecord, ReservationRecord, Slot};
use berth_core::schedule::Placed;
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::plan::{plan, unfit_error};
use super::slots::{draws_of, follow_end, past_of, released, slot_events, Drawn, Past};
use super::{check_name_free, lock_lease, LeaseUpdate, ReservationUpdate};
use crate::commands::{now, record};
use crate::lock;
use crate::queries::fit::Item;
use crate::{Store, StoreError};

/// Refuses an update naming a reservation the lease does not have.
fn check_known(current: &LeaseRecord, update: &LeaseUpdate) -> Result<(), Error> {
    for r in &update.reservations {
        if !current.reservations.iter().any(|c| c.id == r.id) {
            return Err(Error::invalid(
                ErrorCode::InvalidLease,
                format!("lease {} has no reservation {}", current.id, r.id),
            ));
        }
    }
    Ok(())
}

/// Moves `next`'s lease events with its window, unless they already ran.
fn move_events(next: &mut LeaseRecord, update: &LeaseUpdate, window_moved: bool) -> Result<(), Error> {
    let (start, end) = (next.start, next.end);
    let before_end = match update.before_end {
        Some(t) => Some(lease::before_end_time(start, end, Some(t))?),
        None if window_moved => Some(lease::before_end_time(start, end, None)?),
        None => None,
    };
    for e in next.events.iter_mut() {
        let t = match e.event_type {
            LeaseEventType::StartLease => Some(start),
            LeaseEventType::EndLease => Some(end),
            LeaseEventType::BeforeEndLease => before_end,
        };
        if let Some(t) = t {
            if e.status == LeaseEventStatus::Undone {
                e.time = t;
            }
        }
    }
    Ok(())
}

/// The lease's slot consumers and those drawing from them, locked
/// together in uuid order.
struct Locked {
    slots: Vec<Uuid>,
    /// The consumers drawing from the slots, sorted.
    drawers: Vec<Uuid>,
    /// (slot, consumer, resources), read under the locks.
    draws: Vec<(Uuid, Uuid, BTreeMap<String, i64>)>,
}

async fn lock_slots(tx: &Transaction<'_>, current: &LeaseRecord) -> Result<Locked, StoreError> {
    let slots: Vec<Uuid> = current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
    // Consumers drawing from the slots count as part of them.
    let mut drawers: Vec<Uuid> = draws_of(tx, &slots).await?.iter().map(|d| d.1).collect();
    drawers.sort();
    drawers.dedup();
    let mut lock: Vec<Uuid> = slots.iter().chain(&drawers).copied().collect();
    lock.sort();
    lock::consumers(tx, &lock).await?;
    let draws = draws_of(tx, &slots).await?;
    Ok(Locked { slots, drawers, draws })
}

/// Puts a changed reservation's new slots in place, keeping a slot's
/// consumer where it stays on the same provider, and releases the slots it
/// gives up; a slot something draws from cannot be given up.
fn reslot(
    r: &mut ReservationRecord,
    placed: Vec<Placed>,
    u: &ReservationUpdate,
    drawn: &Drawn,
    current: &LeaseRecord,
    past: &Past,
    at: DateTime<Utc>,
) -> Result<Vec<Event>, Error> {
    r.params = u.params.clone();
    let mut old: Vec<Slot> = r.slots.clone();
    r.slots = placed
        .into_iter()
        .map(|p| match old.iter().position(|s| s.provider == p.provider) {
            Some(i) => Slot { resources: p.resources, ..old.remove(i) },
            None => Slot { consumer: Uuid::new_v4(), provider: p.provider, resources: p.resources },
        })
        .collect();
    if let Some(s) = old.iter().find(|s| drawn.contains_key(&s.consumer)) {
        return Err(Error::conflict(
            ErrorCode::LeaseStarted,
            format!("the slot on {} is in use by a consumer; it cannot be given up", s.provider),
        ));
    }
    Ok(old.iter().map(|s| released(s.consumer, current, past, at)).collect())
}

/// Re-places `next`'s reservations over its window: the changed ones
/// anew, the others where they are. Returns the slots' events, and those of
/// consumers drawing from them when the end moved.
async fn replace_slots(
    tx: &Transaction<'_>,
    current: &LeaseRecord,
    next: &mut LeaseRecord,
    update: &LeaseUpdate,
    at: DateTime<Utc>,
    cleaning: chrono::Duration,
) -> Result<Vec<Event>, StoreError> {
    let Locked { slots, drawers, draws } = lock_slots(tx, current).await?;
    let mut drawn: Drawn = HashMap::new();
    for (slot, _, res) in &draws {
        for (k, v) in res {
            *drawn.entry(*slot).or_default().entry(k.clone()).or_default() += v;
        }
    }
    let changed: HashMap<Uuid, &ReservationUpdate> = update.reservations.iter().map(|r| (r.id, r)).collect();
    let items: Vec<Item> = current
        .reservations
        .iter()
        .map(|r| match changed.get(&r.id) {
            Some(u) => Item::Place(&u.demand, r.slots.iter().map(|s| s.provider).collect()),
            None => Item::Fixed(&r.slots),
        })
        .collect();
    let own: Vec<Uuid> = slots.iter().chain(draws.iter().map(|d| &d.1)).copied().collect();
    let types: Vec<&str> = current.reservations.iter().map(|r| r.resource_type.as_str()).collect();
    let window = Window { start: next.start, end: Some(next.end) };
    let mut placed = plan(tx, &current.project_id, &items, &[window], &own, cleaning)
        .await?
        .map_err(|u| unfit_error(u, &types, false))?;
    let per_item = placed.pop().expect("one window");
    // A started lease's slots keep what they held before now where it was
    // and hold anew from now; one not started holds over its whole window.
    let (past, from) = if current.has_started(at) {
        (past_of(tx, next, &slots, at).await?, next.start.max(at))
    } else {
        (Past::new(), next.start)
    };
    let mut events = Vec::new();
    for (r, placed) in next.reservations.iter_mut().zip(per_item) {
        if let Some(u) = changed.get(&r.id) {
            events.extend(reslot(r, placed, u, &drawn, current, &past, at)?);
        }
    }
    events.extend(slot_events(next, &drawn, &past, from, at));
    if next.end != current.end {
        let providers: Vec<Uuid> =
            current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.provider)).collect();
        for c in &drawers {
            events.extend(follow_end(tx, *c, &providers, current.end, next.end, at).await?);
        }
    }
    Ok(events)
}

impl Store {
    /// Renames, moves and re-sizes a lease; everything that changes is
    /// re-checked over the new window, all or nothing.
    pub async fn update_lease(
        &self,
        meta: &EventMeta,
        id: Uuid,
        project: Option<&str>,
        update: LeaseUpdate,
    ) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let current = lock_lease(tx, id, project).await?.record;
            // Read once the lease is ours: what changed it meanwhile is older.
            let at = now(tx).await?;
            update_locked(tx, meta, current, &update, at, self.cleaning_time()).await
        })
    }
}

/// Updates `current`, whose row the caller has locked, deciding at `at`.
pub(super) async fn update_locked(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    current: LeaseRecord,
    update: &LeaseUpdate,
    at: DateTime<Utc>,
    cleaning: chrono::Duration,
) -> Result<(), StoreError> {
    let id = current.id;
    // Quota: the project's guard, before any consumer or provider.
    let quota_guards = crate::quota::lock(tx, std::slice::from_ref(&current.project_id)).await?;
    check_known(&current, update)?;
    let change = LeaseChange {
        name: update.name.clone(),
        start: update.start.map(|s| s.resolve(at)),
        end: update.end.map(|e| e.resolve(at)),
        before_end: update.before_end,
        reservations: !update.reservations.is_empty(),
    };
    let (start, end) = lease::check_change(&current, &change, at)?;
    let mut next = current.clone();
    if let Some(name) = &update.name {
        check_name_free(tx, &current.project_id, std::slice::from_ref(name), Some(id)).await?;
        next.name = name.clone();
    }
    next.start = start;
    next.end = end;
    let window_moved = start != current.start || end != current.end;
    // Lease events follow the window unless they already ran.
    move_events(&mut next, update, window_moved)?;
    let mut events = Vec::new();
    if window_moved || !update.reservations.is_empty() {
        events = replace_slots(tx, &current, &mut next, update, at, cleaning).await?;
    }
    events.insert(0, Event::LeaseUpdated { lease: next, at });
    // Quota: the slots' new holds against those they replace.
    crate::quota::Check::for_events(at, &events).run(tx, &quota_guards).await?;
    record(tx, meta, &events).await?;
    Ok(())
}
