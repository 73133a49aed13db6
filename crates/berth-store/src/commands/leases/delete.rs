//! Deleting a lease: what it held is freed at once.

use std::collections::BTreeSet;

use berth_core::lease::{self, LeaseRecord};
use berth_core::{Error, Event, EventMeta};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::lock_lease;
use super::slots::{released, Past};
use crate::commands::{now, record};
use crate::lock;
use crate::{Store, StoreError};

/// The classes named after the lease's reservations that nothing uses any
/// more: they go with the lease.
async fn classes_freed(tx: &Transaction<'_>, current: &LeaseRecord) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    for r in &current.reservations {
        let name = lease::reservation_class(r.id);
        let in_use = tx
            .query_opt(
                "SELECT 1 FROM resource_classes WHERE name = $1
                 AND NOT EXISTS (SELECT 1 FROM inventories WHERE resource_class = $1)
                 AND NOT EXISTS (SELECT 1 FROM allocations WHERE resource_class = $1)",
                &[&name],
            )
            .await?;
        if in_use.is_some() {
            events.push(Event::ResourceClassDeleted { name });
        }
    }
    Ok(events)
}

/// A host lease deleted while it runs: its end will not fire, so its hosts
/// (among `providers`) leave its pool for the free pool here.
async fn pools_left(
    tx: &Transaction<'_>,
    current: &LeaseRecord,
    providers: &[Uuid],
    at: DateTime<Utc>,
) -> Result<Vec<Event>, StoreError> {
    let pools: Vec<Uuid> = current
        .reservations
        .iter()
        .filter(|r| !r.slots.is_empty() && r.resource_type == "physical:host")
        .map(|r| r.resource_id)
        .collect();
    let mut events = Vec::new();
    if pools.is_empty() {
        return Ok(events);
    }
    for r in tx
        .query(
            "SELECT provider_uuid, array_agg(aggregate) AS aggregates FROM provider_aggregates
             WHERE provider_uuid = ANY($1) GROUP BY 1 ORDER BY 1",
            &[&providers],
        )
        .await?
    {
        let aggregates: Vec<Uuid> = r.get("aggregates");
        let mut aggregates: BTreeSet<Uuid> = aggregates.into_iter().collect();
        let before = aggregates.len();
        aggregates.retain(|a| !pools.contains(a));
        if aggregates.len() != before {
            aggregates.insert(lease::FREE_POOL);
            events.push(Event::ProviderAggregatesReplaced {
                provider: r.get("provider_uuid"),
                aggregates,
                bump: true,
                at,
            });
        }
    }
    Ok(events)
}

impl Store {
    /// Deletes a lease and frees what it held at once.
    pub async fn delete_lease(&self, meta: &EventMeta, id: Uuid, project: Option<&str>) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let current = lock_lease(tx, id, project).await?.record;
            // Read once the lease is ours: what changed it meanwhile is older.
            let at = now(tx).await?;
            let mut consumers: Vec<Uuid> =
                current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
            consumers.sort();
            lock::consumers(tx, &consumers).await?;
            let mut providers: Vec<Uuid> =
                current.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.provider)).collect();
            providers.sort();
            providers.dedup();
            lock::providers(tx, &providers).await?;
            let mut events = vec![Event::LeaseDeleted { id, at }];
            events.extend(classes_freed(tx, &current).await?);
            events.extend(
                current
                    .reservations
                    .iter()
                    .flat_map(|r| r.slots.iter())
                    .map(|s| released(s.consumer, &current, &Past::new(), at)),
            );
            events.extend(pools_left(tx, &current, &providers, at).await?);
            record(tx, meta, &events).await?;
            Ok(())
        })
    }
}
