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

/// Each slot's allocations over the lease's window: its resources less what
/// consumers draw from it (`drawn`, by slot consumer).
pub(super) fn slot_events(lease: &LeaseRecord, drawn: &Drawn, at: DateTime<Utc>) -> Vec<Event> {
    let window = Window { start: lease.start, end: Some(lease.end) };
    let none = BTreeMap::new();
    lease
        .reservations
        .iter()
        .flat_map(|r| r.slots.iter())
        .map(|s| Event::AllocationsReplaced {
            consumer: s.consumer,
            project_id: lease.project_id.clone(),
            user_id: lease.user_id.clone(),
            consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
            allocations: s
                .resources
                .iter()
                .map(|(class, used)| (class, used - drawn.get(&s.consumer).unwrap_or(&none).get(class).unwrap_or(&0)))
                .filter(|(_, used)| *used > 0)
                .map(|(class, used)| Allocation { provider: s.provider, resource_class: class.clone(), used, window })
                .collect(),
            providers_bumped: None,
            at,
        })
        .collect()
}

/// A slot given up: its consumer holds nothing any more.
pub(super) fn released(consumer: Uuid, lease: &LeaseRecord, at: DateTime<Utc>) -> Event {
    Event::AllocationsReplaced {
        consumer,
        project_id: lease.project_id.clone(),
        user_id: lease.user_id.clone(),
        consumer_type: Some(SLOT_CONSUMER_TYPE.to_string()),
        allocations: Vec::new(),
        providers_bumped: None,
        at,
    }
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
        .map(|r| (r.get(0), r.get(1), serde_json::from_value(r.get(2)).unwrap_or_default()))
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
            "SELECT provider_uuid, resource_class, used, lower(during), upper(during) FROM allocations
             WHERE consumer_uuid = $1 ORDER BY provider_uuid, resource_class, lower(during)",
            &[&consumer],
        )
        .await?;
    let allocations: Vec<Allocation> = rows
        .iter()
        .filter_map(|r| {
            let provider: Uuid = r.get(0);
            let start: DateTime<Utc> = r.get(3);
            let mut end: Option<DateTime<Utc>> = r.get(4);
            if providers.contains(&provider) && end == Some(old_end) {
                end = Some(new_end);
            }
            if end.is_some_and(|e| e <= start) {
                return None;
            }
            Some(Allocation { provider, resource_class: r.get(1), used: r.get(2), window: Window { start, end } })
        })
        .collect();
    Ok(Some(Event::AllocationsReplaced {
        consumer,
        project_id: who.get(0),
        user_id: who.get(1),
        consumer_type: who.get(2),
        allocations,
        providers_bumped: None,
        at,
    }))
}
