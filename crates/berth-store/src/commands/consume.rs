//! Consuming a reservation: an allocation written through Placement that
//! names a reservation's class (`CUSTOM_RESERVATION_<id>`, as Blazar's
//! flavors request) is drawn from what the reservation's slot holds on that
//! provider instead of being added on top. In the same transaction the slot's
//! hold shrinks by what the consumer takes; it grows back when the consumer's
//! allocation is replaced or deleted. The consumer's allocations on that
//! provider end with the lease.
//!
//! This runs first in the Placement allocation command and only rewrites its
//! batch: the slot consumers join the batch, and the capacity check that
//! follows sees the hold and the draw cancel out.

use berth_core::time::DateMath;
use std::collections::{BTreeMap, HashMap};

use berth_core::error::ErrorKind;
use berth_core::event::Allocation;
use berth_core::lease::{reservation_of_class, LeaseStatus};
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde_json::Value;
use uuid::Uuid;

use super::allocations::{ConsumerAllocations, GenerationCheck};
use super::leases::SLOT_CONSUMER_TYPE;
use super::{now, record};
use crate::StoreError;

pub const NOT_ACTIVE: &str = "berth.reservation.not_active";
pub const NOT_YOURS: &str = "berth.reservation.not_yours";
pub const NOT_HERE: &str = "berth.reservation.not_on_provider";

type Amounts = BTreeMap<String, i64>;

struct SlotHold {
    consumer: Uuid,
    provider: Uuid,
    lease_project: String,
    lease_user: String,
    window: Window,
    /// What it holds now, per class.
    held: Amounts,
}

fn amounts(v: Value) -> Amounts {
    serde_json::from_value(v).unwrap_or_default()
}

/// Whether `batch` names a reservation's class (and so draws from a slot).
pub(crate) fn names_reservation(batch: &[ConsumerAllocations]) -> bool {
    batch.iter().any(|c| c.allocations.iter().any(|a| reservation_of_class(&a.resource_class).is_some()))
}

/// Which of `consumers` hold a draw now (replacing their allocations gives
/// the draw back). Read with the consumers locked, it cannot change.
pub(crate) const HOLDS_DRAWS: &str =
    "SELECT DISTINCT consumer_uuid FROM reservation_draws WHERE consumer_uuid = ANY($1)";

/// Rewrites `batch` so reservation classes draw from their slots; records
/// the draws. For a batch that names a reservation class or holds a draw.
pub(crate) async fn draw_from_holds(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    mut batch: Vec<ConsumerAllocations>,
) -> Result<Vec<ConsumerAllocations>, StoreError> {
    let mut ids: Vec<Uuid> = batch.iter().map(|c| c.consumer).collect();
    ids.sort();
    // Quota: the projects' guards come before any consumer (crate::quota).
    let projects: std::collections::BTreeSet<String> = batch.iter().map(|c| c.project_id.clone()).collect();
    crate::lock::guards(tx, &projects.into_iter().collect::<Vec<_>>()).await?;
    // The batch's consumers first (their draws cannot change under us), then their slots.
    crate::lock::consumers(tx, &ids).await?;
    let mut old: HashMap<(Uuid, Uuid), Amounts> = HashMap::new();
    for r in tx
        .query(
            "SELECT consumer_uuid, slot_consumer, resources FROM reservation_draws WHERE consumer_uuid = ANY($1)",
            &[&ids],
        )
        .await?
    {
        old.insert((r.get(0), r.get(1)), amounts(r.get(2)));
    }
    let at = now(tx).await?;
    // Slots named by the request, per (reservation, provider).
    let mut slot_ids: Vec<Uuid> = old.keys().map(|k| k.1).collect();
    let mut wanted: Vec<(usize, Uuid, Uuid)> = Vec::new(); // (batch index, reservation, provider)
    for (i, c) in batch.iter().enumerate() {
        for a in &c.allocations {
            if let Some(rid) = reservation_of_class(&a.resource_class) {
                wanted.push((i, rid, a.provider));
            }
        }
    }
    let mut by_reservation: HashMap<(Uuid, Uuid), Vec<Uuid>> = HashMap::new();
    for (_, rid, provider) in &wanted {
        let rows = tx
            .query(
                "SELECT s.consumer_uuid FROM reservation_slots s WHERE s.reservation_id = $1 AND s.provider_uuid = $2
                 ORDER BY s.consumer_uuid",
                &[rid, provider],
            )
            .await?;
        let found: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
        slot_ids.extend(found.iter().copied());
        by_reservation.insert((*rid, *provider), found);
    }
    slot_ids.sort();
    slot_ids.dedup();
    crate::lock::consumers(tx, &slot_ids).await?;
    let mut slots: HashMap<Uuid, SlotHold> = HashMap::new();
    for r in tx
        .query(
            "SELECT s.consumer_uuid, s.provider_uuid, l.project_id, l.user_id, l.start_at, l.end_at
             FROM reservation_slots s JOIN reservations r ON r.id = s.reservation_id JOIN leases l ON l.id = r.lease_id
             WHERE s.consumer_uuid = ANY($1)",
            &[&slot_ids],
        )
        .await?
    {
        let end: DateTime<Utc> = r.get(5);
        slots.insert(
            r.get(0),
            SlotHold {
                consumer: r.get(0),
                provider: r.get(1),
                lease_project: r.get(2),
                lease_user: r.get(3),
                window: Window { start: r.get(4), end: Some(end) },
                held: Amounts::new(),
            },
        );
    }
    for r in tx
        .query(
            "SELECT consumer_uuid, resource_class, used FROM allocations WHERE consumer_uuid = ANY($1)",
            &[&slot_ids],
        )
        .await?
    {
        if let Some(s) = slots.get_mut(&r.get::<_, Uuid>(0)) {
            *s.held.entry(r.get(1)).or_default() += r.get::<_, i64>(2);
        }
    }
    // Give every old draw back first.
    for ((_, slot), drawn) in &old {
        if let Some(s) = slots.get_mut(slot) {
            for (class, n) in drawn {
                *s.held.entry(class.clone()).or_default() += n;
            }
        }
    }
    // Then draw anew.
    let mut new: HashMap<(Uuid, Uuid), Amounts> = HashMap::new();
    for (i, rid, provider) in &wanted {
        let c = &batch[*i];
        let candidates = by_reservation.get(&(*rid, *provider)).cloned().unwrap_or_default();
        let Some(first) = candidates.first().and_then(|id| slots.get(id)) else {
            return Err(Error::new(
                ErrorKind::Capacity,
                NOT_HERE,
                format!("reservation {rid} holds nothing on resource provider {provider}"),
            )
            .into());
        };
        if first.lease_project != c.project_id {
            return Err(Error::new(
                ErrorKind::Forbidden,
                NOT_YOURS,
                format!("reservation {rid} belongs to another project"),
            )
            .into());
        }
        let lease_row = tx
            .query_one("SELECT l.status FROM reservations r JOIN leases l ON l.id = r.lease_id WHERE r.id = $1", &[rid])
            .await?;
        let status: String = lease_row.get(0);
        let live = !matches!(
            LeaseStatus::parse(&status),
            Some(LeaseStatus::Terminated | LeaseStatus::Terminating | LeaseStatus::Error | LeaseStatus::Deleting)
        );
        if !(live && first.window.contains(at)) {
            return Err(Error::new(
                ErrorKind::Conflict,
                NOT_ACTIVE,
                format!("reservation {rid} is not active now: its lease runs {:?}", first.window),
            )
            .into());
        }
        // What the consumer takes on this provider, other than the marker class.
        let mut want: Amounts = Amounts::new();
        for a in c
            .allocations
            .iter()
            .filter(|a| a.provider == *provider && reservation_of_class(&a.resource_class).is_none())
        {
            *want.entry(a.resource_class.clone()).or_default() += a.used;
        }
        for slot in candidates {
            let s = slots.get_mut(&slot).expect("locked slot");
            let mut took = Amounts::new();
            for (class, n) in want.iter_mut() {
                let have = s.held.get(class).copied().unwrap_or(0);
                let take = (*n).min(have);
                if take > 0 {
                    *n -= take;
                    *s.held.get_mut(class).expect("held") -= take;
                    took.insert(class.clone(), take);
                }
            }
            if !took.is_empty() {
                let entry = new.entry((c.consumer, slot)).or_default();
                for (k, v) in took {
                    *entry.entry(k).or_default() += v;
                }
            }
        }
        // Whatever the slot could not give comes from free capacity, checked as usual.
    }
    // The consumers: without the marker class; on a reservation's provider, ending with its lease.
    let ends: HashMap<(usize, Uuid), DateTime<Utc>> = wanted
        .iter()
        .filter_map(|(i, rid, p)| {
            let slot = by_reservation.get(&(*rid, *p))?.first()?;
            Some(((*i, *p), slots[slot].window.end?))
        })
        .collect();
    for (i, c) in batch.iter_mut().enumerate() {
        c.allocations.retain(|a| reservation_of_class(&a.resource_class).is_none());
        for a in c.allocations.iter_mut() {
            if let Some(end) = ends.get(&(i, a.provider)) {
                let e = a.window.end.map_or(*end, |x| x.min(*end));
                a.window = Window {
                    start: a.window.start.min(e.saturating_minus(chrono::Duration::microseconds(1))),
                    end: Some(e),
                };
            }
        }
    }
    // The slots, as they now hold.
    let mut touched: Vec<Uuid> = old.keys().chain(new.keys()).map(|k| k.1).collect();
    touched.sort();
    touched.dedup();
    for slot in &touched {
        let Some(s) = slots.get(slot) else { continue };
        if batch.iter().any(|c| c.consumer == s.consumer) {
            continue;
        }
        batch.push(ConsumerAllocations {
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
        });
    }
    // The draws, where they changed.
    let mut events = Vec::new();
    let mut keys: Vec<(Uuid, Uuid)> = old.keys().chain(new.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let before = old.get(&k).cloned().unwrap_or_default();
        let after = new.get(&k).cloned().unwrap_or_default();
        if before != after && slots.contains_key(&k.1) {
            events.push(Event::ReservationDrawn { slot: k.1, consumer: k.0, resources: after, at });
        }
    }
    record(tx, meta, &events).await?;
    Ok(batch)
}
