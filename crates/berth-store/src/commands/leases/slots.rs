//! A reservation's slots as consumers: the allocations each holds over its
//! lease's window, and the consumers that draw from them.

use std::collections::{BTreeMap, HashMap};

use berth_core::event::Allocation;
use berth_core::lease::LeaseRecord;
use berth_core::{Event, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::SLOT_CONSUMER_TYPE;
use crate::StoreError;

/// What consumers draw from slots, by slot consumer and class.
pub(super) type Drawn = HashMap<Uuid, BTreeMap<String, i64>>;

/// What each slot held before the command's instant, inside its lease's
/// window, by slot consumer: history, kept as it was (a heal's move
/// included) when the slot's holds are written again from that instant on.
pub(super) type Past = HashMap<Uuid, Vec<Allocation>>;

/// What `slots` of `lease` (its new window) held before `at`, clipped to
/// the window.
pub(super) async fn past_of(
    tx: &Transaction<'_>,
    lease: &LeaseRecord,
    slots: &[Uuid],
    at: DateTime<Utc>,
) -> Result<Past, StoreError> {
    let until = at.min(lease.end);
    let mut out = Past::new();
    if until <= lease.start {
        return Ok(out);
    }
    let rows = tx
        .query(
            "SELECT consumer_uuid, provider_uuid, resource_class, used, lower(during) AS start_at,
                    upper(during) AS end_at
             FROM allocations WHERE consumer_uuid = ANY($1) AND during && tstzrange($2, $3)
             ORDER BY consumer_uuid, lower(during), provider_uuid, resource_class",
            &[&slots, &lease.start, &until],
        )
        .await?;
    for r in &rows {
        let (start, end): (DateTime<Utc>, Option<DateTime<Utc>>) = (r.get("start_at"), r.get("end_at"));
        let window = Window { start: start.max(lease.start), end: Some(end.map_or(until, |e| e.min(until))) };
        out.entry(r.get("consumer_uuid")).or_default().push(Allocation {
            provider: r.get("provider_uuid"),
            resource_class: r.get("resource_class"),
            used: r.get("used"),
            window,
        });
    }
    Ok(out)
}

/// Each slot's allocations: what it held before `from` (`past`, as it
/// was), then from `from` to the lease's end its resources less what
/// consumers draw from it (`drawn`, by slot consumer), on its provider. A
/// hold that goes on unchanged stays one allocation. `at`: the command's
/// instant, for the events.
pub(super) fn slot_events(
    lease: &LeaseRecord,
    drawn: &Drawn,
    past: &Past,
    from: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Vec<Event> {
    let none = BTreeMap::new();
    lease
        .reservations
        .iter()
        .flat_map(|r| r.slots.iter())
        .map(|s| {
            let mut allocations = past.get(&s.consumer).cloned().unwrap_or_default();
            if from < lease.end {
                let draws = drawn.get(&s.consumer).unwrap_or(&none);
                for (class, used) in &s.resources {
                    let used = used - draws.get(class).unwrap_or(&0);
                    if used <= 0 {
                        continue;
                    }
                    let goes_on = allocations.iter_mut().find(|a| {
                        a.provider == s.provider
                            && a.resource_class == *class
                            && a.used == used
                            && a.window.end == Some(from)
                    });
                    match goes_on {
                        Some(a) => a.window.end = Some(lease.end),
                        None => allocations.push(Allocation {
                            provider: s.provider,
                            resource_class: class.clone(),
                            used,
                            window: Window { start: from, end: Some(lease.end) },
                        }),
                    }
                }
            }
            slot_replaced(s.consumer, lease, allocations, at)
        })
        .collect()
}

/// The event that makes slot `consumer` of `lease` hold `allocations`:
/// all it holds, its past included.
pub(super) fn slot_replaced(
    consumer: Uuid,
    lease: &LeaseRecord,
    allocations: Vec<Allocation>,
    at: DateTime<Utc>,
) -> Event {
    Event::AllocationsReplaced {
        consumer,
        project_id: lease.project_id.clone(),
        user_id: lease.user_id.clone(),
        consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
        allocations,
        providers_bumped: None,
        at,
    }
}

/// A slot given up: its consumer holds nothing from `at` on (nothing at
/// all when `past` has nothing of it, as for a deleted lease).
pub(super) fn released(consumer: Uuid, lease: &LeaseRecord, past: &Past, at: DateTime<Utc>) -> Event {
    slot_replaced(consumer, lease, past.get(&consumer).cloned().unwrap_or_default(), at)
}

/// What consumers draw from these slots: (slot, consumer, resources).
pub(super) async fn draws_of(
    tx: &Transaction<'_>,
    slots: &[Uuid],
) -> Result<Vec<(Uuid, Uuid, BTreeMap<String, i64>)>, StoreError> {
    Ok(tx
        .query(
            "SELECT slot_consumer, consumer_uuid, resources FROM reservation_draws WHERE slot_consumer = ANY($1)",
            &[&slots],
        )
        .await?
        .iter()
        .map(|r| {
            (
                r.get("slot_consumer"),
                r.get("consumer_uuid"),
                serde_json::from_value(r.get("resources")).unwrap_or_default(),
            )
        })
        .collect())
}

/// A consumer drawing from a slot keeps its allocations on the slot's
/// provider until the lease ends: when the end moves, they move with it.
pub(super) async fn follow_end(
    tx: &Transaction<'_>,
    consumer: Uuid,
    providers: &[Uuid],
    old_end: DateTime<Utc>,
    new_end: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<Option<Event>, StoreError> {
    let Some(who) =
        tx.query_opt("SELECT project_id, user_id, consumer_type FROM consumers WHERE uuid = $1", &[&consumer]).await?
    else {
        return Ok(None);
    };
    let rows = tx
        .query(
            "SELECT provider_uuid, resource_class, used, lower(during) AS start_at, upper(during) AS end_at
             FROM allocations WHERE consumer_uuid = $1 ORDER BY provider_uuid, resource_class, lower(during)",
            &[&consumer],
        )
        .await?;
    let allocations: Vec<Allocation> = rows
        .iter()
        .filter_map(|r| {
            let provider: Uuid = r.get("provider_uuid");
            let start: DateTime<Utc> = r.get("start_at");
            let mut end: Option<DateTime<Utc>> = r.get("end_at");
            if providers.contains(&provider) && end == Some(old_end) {
                end = Some(new_end);
            }
            if end.is_some_and(|e| e <= start) {
                return None;
            }
            let (resource_class, used) = (r.get("resource_class"), r.get("used"));
            Some(Allocation { provider, resource_class, used, window: Window { start, end } })
        })
        .collect();
    Ok(Some(Event::AllocationsReplaced {
        consumer,
        project_id: who.get("project_id"),
        user_id: who.get("user_id"),
        consumer_type: who.get("consumer_type"),
        allocations,
        providers_bumped: None,
        at,
    }))
}
