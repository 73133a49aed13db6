//! A reshape: several providers' inventories and several consumers'
//! allocations replaced together, so that the state between the two never
//! exists. As in Placement, each reshaped provider first gets an interim
//! inventory (its new classes plus the ones it drops), the allocations are
//! written against that, then the final inventory replaces it; a dropped
//! class must be left without allocations.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::{Event, EventMeta, Inventory};
use uuid::Uuid;

use super::decide::{Decision, Request};
use super::read::{self, Read};
use super::request::{ConsumerAllocations, ReshapeInventory};
use crate::client::GenericClient;
use crate::commands::record_each;
use crate::tx::Pipelined;
use crate::StoreError;

/// Decides and writes one reshape, in the command's transaction.
pub(super) async fn write(
    tx: &Pipelined<'_>,
    meta: &EventMeta,
    consumers: &[ConsumerAllocations],
    reshaped: &[ReshapeInventory],
) -> Result<(), StoreError> {
    let all: Vec<&ConsumerAllocations> = consumers.iter().collect();
    let mut read = read::read(tx, &all, reshaped).await?;
    let at = read.at;
    let mut events: Vec<(&EventMeta, Event)> = interim(&mut read, reshaped)
        .into_iter()
        .map(|(provider, inventories)| (meta, Event::InventoriesReplaced { provider, inventories, at }))
        .collect();
    let request = Request { meta, consumers };
    let decision = read.decide_in_turn(std::slice::from_ref(&request), reshaped, &mut events).pop();
    match decision.expect("one decision per request") {
        Decision::Refused(e) => return Err(e.into()),
        Decision::Written => {}
    }
    let c = tx.client().await?;
    for r in reshaped {
        check_dropped_classes(c, r, consumers, &read.consumer_ids).await?;
    }
    let finals = reshaped.iter().map(|r| Event::InventoriesReplaced {
        provider: r.provider,
        inventories: r.inventories.clone(),
        at,
    });
    events.extend(finals.map(|e| (meta, e)));
    record_each(c, &events).await?;
    Ok(())
}

/// Inventories as the allocations see them: each reshaped provider's
/// interim union of its new classes and the ones it drops. Answers the
/// interim inventories to record.
fn interim(read: &mut Read, reshaped: &[ReshapeInventory]) -> Vec<(Uuid, BTreeMap<String, Inventory>)> {
    let mut interim = Vec::new();
    for r in reshaped {
        if r.inventories.is_empty() {
            continue;
        }
        for (class, inv) in &r.inventories {
            read.inventories.insert((r.provider, class.clone()), *inv);
        }
        let union: BTreeMap<String, Inventory> = read
            .inventories
            .iter()
            .filter(|((p, _), _)| *p == r.provider)
            .map(|((_, class), inv)| (class.clone(), *inv))
            .collect();
        interim.push((r.provider, union));
    }
    interim
}

/// Classes a reshape drops from a provider must be left without
/// allocations: neither other consumers' (held now or later) nor the ones
/// this reshape writes.
async fn check_dropped_classes(
    tx: &impl GenericClient,
    r: &ReshapeInventory,
    consumers: &[ConsumerAllocations],
    moving: &[Uuid],
) -> Result<(), StoreError> {
    let kept: Vec<&str> = r.inventories.keys().map(String::as_str).collect();
    let mut in_use: BTreeSet<String> = tx
        .query(
            "SELECT DISTINCT resource_class FROM allocations
             WHERE provider_uuid = $1 AND NOT (resource_class = ANY($2)) AND consumer_uuid <> ALL($3)
               AND (upper(during) IS NULL OR upper(during) > now())",
            &[&r.provider, &kept, &moving],
        )
        .await?
        .iter()
        .map(|row| row.get("resource_class"))
        .collect();
    for c in consumers {
        for a in &c.allocations {
            if a.provider == r.provider && !r.inventories.contains_key(&a.resource_class) {
                in_use.insert(a.resource_class.clone());
            }
        }
    }
    if !in_use.is_empty() {
        return Err(crate::refuse::inventory_in_use(r.provider, in_use).into());
    }
    Ok(())
}
