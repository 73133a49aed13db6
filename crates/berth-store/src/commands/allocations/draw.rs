//! Consuming a reservation: an allocation written through Placement that
//! names a reservation's class (`CUSTOM_RESERVATION_<id>`, as Blazar's
//! flavors request) is drawn from what the reservation's slot holds on that
//! provider instead of being added on top. In the same transaction the slot's
//! hold shrinks by what the consumer takes; it grows back when the consumer's
//! allocation is replaced or deleted. The consumer's allocations on that
//! provider end with the lease. The arithmetic is berth-core's
//! (`berth_core::draw`).
//!
//! This only rewrites a request before it is decided: the slot consumers
//! join it, and the capacity check that follows sees the hold and the draw
//! cancel out. The draws are recorded with the request, if it is written.

use std::collections::{BTreeSet, HashMap};

use berth_core::draw::{self, Amounts};
use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::event::Allocation;
use berth_core::lease::{reservation_of_class, LeaseStatus};
use berth_core::{Error, Event, Window};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::request::{ConsumerAllocations, GenerationCheck};
use crate::client::GenericClient;
use crate::commands::{now, SLOT_CONSUMER_TYPE};
use crate::StoreError;

/// The draws the consumers of `$1` hold: (consumer, slot, amounts).
pub(super) const DRAWS_HELD: &str =
    "SELECT consumer_uuid, slot_consumer, resources FROM reservation_draws WHERE consumer_uuid = ANY($1)";

/// The slots of reservation `$1` on provider `$2`, in the order drawn from.
pub(super) const SLOTS_OF: &str = "SELECT s.consumer_uuid FROM reservation_slots s
     WHERE s.reservation_id = $1 AND s.provider_uuid = $2 ORDER BY s.consumer_uuid";

/// The slots of `$1` with their provider and their lease's project, user and window.
pub(super) const SLOT_LEASES: &str =
    "SELECT s.consumer_uuid, s.provider_uuid, l.project_id, l.user_id, l.start_at, l.end_at
     FROM reservation_slots s JOIN reservations r ON r.id = s.reservation_id JOIN leases l ON l.id = r.lease_id
     WHERE s.consumer_uuid = ANY($1)";

/// What the slots of `$1` hold.
pub(super) const SLOT_HOLDS: &str =
    "SELECT consumer_uuid, resource_class, used FROM allocations WHERE consumer_uuid = ANY($1)";

/// The status of reservation `$1`'s lease.
pub(super) const LEASE_STATUS: &str =
    "SELECT l.status FROM reservations r JOIN leases l ON l.id = r.lease_id WHERE r.id = $1";

/// A request rewritten to draw from its reservations' slots, with the
/// draws it makes or gives back.
pub(super) struct Drawn {
    pub consumers: Vec<ConsumerAllocations>,
    pub events: Vec<Event>,
}

/// A slot consumer: what a reservation holds on one provider.
struct SlotHold {
    consumer: Uuid,
    provider: Uuid,
    lease_project: String,
    lease_user: String,
    window: Window,
    /// What it holds now, per class.
    held: Amounts,
}

/// Draws by (consumer, slot).
type Draws = HashMap<(Uuid, Uuid), Amounts>;

/// Reservation classes named: (index in the request, reservation, provider).
type Wanted = Vec<(usize, Uuid, Uuid)>;

/// The slots of each (reservation, provider) named, in the order drawn from.
type SlotsOf = HashMap<(Uuid, Uuid), Vec<Uuid>>;

fn amounts(v: Value) -> Amounts {
    serde_json::from_value(v).unwrap_or_default()
}

/// Whether `batch` names a reservation's class (and so draws from a slot).
pub(super) fn names_reservation(batch: &[ConsumerAllocations]) -> bool {
    batch.iter().any(|c| c.allocations.iter().any(|a| reservation_of_class(&a.resource_class).is_some()))
}

/// Rewrites `batch` so reservation classes draw from their slots and draws
/// held are given back. For a request that names a reservation class or
/// holds a draw. A refusal (the reservation is not on the provider, not the
/// caller's, not active) is a domain error.
pub(super) async fn draw(tx: &impl GenericClient, batch: &[ConsumerAllocations]) -> Result<Drawn, StoreError> {
    let old = lock_and_read_draws(tx, batch).await?;
    let at = now(tx).await?;
    let wanted: Wanted = batch
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.allocations.iter().filter_map(move |a| Some((i, reservation_of_class(&a.resource_class)?, a.provider)))
        })
        .collect();
    let (slots_of, mut slots) = read_slots(tx, &wanted, &old).await?;
    // Give every old draw back first, then draw anew.
    for ((_, slot), drawn) in &old {
        if let Some(s) = slots.get_mut(slot) {
            draw::give_back(&mut s.held, drawn);
        }
    }
    let mut new = Draws::new();
    for (i, rid, provider) in &wanted {
        let c = &batch[*i];
        let candidates = slots_of.get(&(*rid, *provider)).cloned().unwrap_or_default();
        let Some(first) = candidates.first().and_then(|id| slots.get(id)) else {
            let detail = format!("reservation {rid} holds nothing on resource provider {provider}");
            return Err(Error::new(ErrorKind::Capacity, ErrorCode::ReservationNotHere, detail).into());
        };
        check_reservation(tx, *rid, first, &c.project_id, at).await?;
        // What the consumer takes on this provider, other than the marker class.
        let mut want = Amounts::new();
        for a in c
            .allocations
            .iter()
            .filter(|a| a.provider == *provider && reservation_of_class(&a.resource_class).is_none())
        {
            *want.entry(a.resource_class.clone()).or_default() += a.used;
        }
        for slot in candidates {
            let s = slots.get_mut(&slot).expect("locked slot");
            let took = draw::take(&mut want, &mut s.held);
            if !took.is_empty() {
                draw::add(new.entry((c.consumer, slot)).or_default(), took);
            }
        }
        // Whatever the slots could not give comes from free capacity, checked as usual.
    }
    let mut consumers = without_markers(batch, &wanted, &slots_of, &slots);
    let touched: BTreeSet<Uuid> = old.keys().chain(new.keys()).map(|k| k.1).collect();
    for s in touched.iter().filter_map(|slot| slots.get(slot)) {
        if !consumers.iter().any(|c| c.consumer == s.consumer) {
            consumers.push(slot_consumer(s));
        }
    }
    Ok(Drawn { consumers, events: draw_events(&old, &new, &slots, at) })
}

/// Locks the quota guards and the consumers of `batch` (their draws cannot
/// change under us) and reads the draws they hold.
async fn lock_and_read_draws(tx: &impl GenericClient, batch: &[ConsumerAllocations]) -> Result<Draws, StoreError> {
    let ids: Vec<Uuid> = batch.iter().map(|c| c.consumer).collect();
    let projects: BTreeSet<String> = batch.iter().map(|c| c.project_id.clone()).collect();
    crate::lock::guards(tx, &projects.into_iter().collect::<Vec<_>>()).await?;
    crate::lock::consumers(tx, &ids).await?;
    let rows = tx.query(DRAWS_HELD, &[&ids]).await?;
    Ok(rows
        .into_iter()
        .map(|r| ((r.get("consumer_uuid"), r.get("slot_consumer")), amounts(r.get("resources"))))
        .collect())
}

/// Finds the slots of the reservations named, locks them and those of the
/// draws held, and reads what each holds.
async fn read_slots(
    tx: &impl GenericClient,
    wanted: &Wanted,
    old: &Draws,
) -> Result<(SlotsOf, HashMap<Uuid, SlotHold>), StoreError> {
    let mut slot_ids: Vec<Uuid> = old.keys().map(|k| k.1).collect();
    let mut slots_of = SlotsOf::new();
    for (_, rid, provider) in wanted {
        let rows = tx.query(SLOTS_OF, &[rid, provider]).await?;
        let found: Vec<Uuid> = rows.iter().map(|r| r.get("consumer_uuid")).collect();
        slot_ids.extend(found.iter().copied());
        slots_of.insert((*rid, *provider), found);
    }
    slot_ids.sort();
    slot_ids.dedup();
    crate::lock::consumers(tx, &slot_ids).await?;
    let mut slots: HashMap<Uuid, SlotHold> = HashMap::new();
    for r in tx.query(SLOT_LEASES, &[&slot_ids]).await? {
        let end: DateTime<Utc> = r.get("end_at");
        let slot = SlotHold {
            consumer: r.get("consumer_uuid"),
            provider: r.get("provider_uuid"),
            lease_project: r.get("project_id"),
            lease_user: r.get("user_id"),
            window: Window { start: r.get("start_at"), end: Some(end) },
            held: Amounts::new(),
        };
        slots.insert(slot.consumer, slot);
    }
    for r in tx.query(SLOT_HOLDS, &[&slot_ids]).await? {
        if let Some(s) = slots.get_mut(&r.get::<_, Uuid>("consumer_uuid")) {
            *s.held.entry(r.get("resource_class")).or_default() += r.get::<_, i64>("used");
        }
    }
    Ok((slots_of, slots))
}

/// A reservation may be drawn from by its own project, or one its lease is
/// shared with (`berth_core::share`), while its lease runs.
async fn check_reservation(
    tx: &impl GenericClient,
    rid: Uuid,
    slot: &SlotHold,
    project: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    if slot.lease_project != project && !crate::queries::shares::shared_with(tx, rid, project).await? {
        let detail = format!("reservation {rid} belongs to another project");
        return Err(Error::new(ErrorKind::Forbidden, ErrorCode::ReservationNotYours, detail).into());
    }
    let row = tx.query_one(LEASE_STATUS, &[&rid]).await?;
    let status: String = row.get("status");
    let live = !matches!(
        LeaseStatus::parse(&status),
        Some(LeaseStatus::Terminated | LeaseStatus::Terminating | LeaseStatus::Error | LeaseStatus::Deleting)
    );
    if !(live && slot.window.contains(at)) {
        let detail = format!("reservation {rid} is not active now: its lease runs {:?}", slot.window);
        return Err(Error::new(ErrorKind::Conflict, ErrorCode::ReservationNotActive, detail).into());
    }
    Ok(())
}

/// The request's consumers without the marker classes; on a reservation's
/// provider, ending with its lease.
fn without_markers(
    batch: &[ConsumerAllocations],
    wanted: &Wanted,
    slots_of: &SlotsOf,
    slots: &HashMap<Uuid, SlotHold>,
) -> Vec<ConsumerAllocations> {
    let ends: HashMap<(usize, Uuid), DateTime<Utc>> = wanted
        .iter()
        .filter_map(|(i, rid, p)| {
            let slot = slots_of.get(&(*rid, *p))?.first()?;
            Some(((*i, *p), slots[slot].window.end?))
        })
        .collect();
    let mut consumers = batch.to_vec();
    for (i, c) in consumers.iter_mut().enumerate() {
        c.allocations.retain(|a| reservation_of_class(&a.resource_class).is_none());
        for a in c.allocations.iter_mut() {
            if let Some(end) = ends.get(&(i, a.provider)) {
                a.window = draw::ending_with_lease(a.window, *end);
            }
        }
    }
    consumers
}

/// A slot consumer as it now holds, joining the request.
fn slot_consumer(s: &SlotHold) -> ConsumerAllocations {
    ConsumerAllocations {
        consumer: s.consumer,
        project_id: s.lease_project.clone(),
        user_id: s.lease_user.clone(),
        consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
        generation: GenerationCheck::Any,
        allocations: s
            .held
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(class, n)| Allocation {
                provider: s.provider,
                resource_class: class.clone(),
                used: *n,
                window: s.window,
            })
            .collect(),
    }
}

/// The draws, where they changed.
fn draw_events(old: &Draws, new: &Draws, slots: &HashMap<Uuid, SlotHold>, at: DateTime<Utc>) -> Vec<Event> {
    let keys: BTreeSet<(Uuid, Uuid)> = old.keys().chain(new.keys()).copied().collect();
    let mut events = Vec::new();
    for k in keys {
        let before = old.get(&k).cloned().unwrap_or_default();
        let after = new.get(&k).cloned().unwrap_or_default();
        if before != after && slots.contains_key(&k.1) {
            events.push(Event::ReservationDrawn { slot: k.1, consumer: k.0, resources: after, at });
        }
    }
    events
}
