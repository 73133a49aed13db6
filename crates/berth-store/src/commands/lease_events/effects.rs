//! The effects hooks ask for (pools, reservable flags, holds, consumers
//! deleted), as events: locked and read first, then carried out in turn.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use berth_core::lease_event::Effect;
use berth_core::Event;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::lock::{self, Sorted};
use crate::{sql, StoreError};

/// Current aggregates of providers, reservable flag and capabilities of hosts,
/// and holds, as a finish batch reads them under its locks.
#[derive(Default)]
pub(super) struct HostState {
    aggregates: HashMap<Uuid, BTreeSet<Uuid>>,
    hosts: HashMap<Uuid, (bool, BTreeMap<String, Value>)>,
    holds: HashSet<Uuid>,
    /// Consumers to delete: (project, user, type).
    consumers: HashMap<Uuid, (String, String, Option<String>)>,
    /// The reservation slots each consumer to delete draws from.
    draws: HashMap<Uuid, Vec<Uuid>>,
}

fn effect_hosts(e: &Effect) -> &[Uuid] {
    match e {
        Effect::MoveHosts { hosts, .. }
        | Effect::SetReservable { hosts, .. }
        | Effect::HoldHosts { hosts, .. }
        | Effect::ReleaseHolds { hosts }
        | Effect::FailHosts { hosts, .. } => hosts,
        Effect::DeleteConsumers { .. } => &[],
    }
}

/// Locks what `effects` touch (consumers, then providers, each sorted) and
/// reads their current state.
pub(super) async fn lock_effects(
    tx: &deadpool_postgres::Transaction<'_>,
    effects: &[&Effect],
) -> Result<HostState, StoreError> {
    let mut state = HostState::default();
    let mut consumers: Vec<Uuid> = effects
        .iter()
        .flat_map(|e| match e {
            Effect::DeleteConsumers { consumers } => consumers.clone(),
            _ => Vec::new(),
        })
        .collect();
    consumers.sort();
    consumers.dedup();
    let mut providers: BTreeSet<Uuid> = effects.iter().flat_map(|e| effect_hosts(e).iter().copied()).collect();
    if !consumers.is_empty() {
        for c in lock::consumers(tx, &consumers).await? {
            state.consumers.insert(c.uuid, (c.project_id, c.user_id, c.consumer_type));
        }
        let held: Vec<Uuid> = state.consumers.keys().copied().collect();
        for r in
            tx.query("SELECT DISTINCT provider_uuid FROM allocations WHERE consumer_uuid = ANY($1)", &[&held]).await?
        {
            providers.insert(r.get("provider_uuid"));
        }
    }
    if providers.is_empty() {
        return Ok(state);
    }
    let providers: Sorted<Uuid> = providers.into_iter().collect();
    let lock_providers = lock::providers_stmt(&providers);
    let providers: &[Uuid] = &providers;
    let found = sql::pipeline(
        tx,
        [
            (lock_providers.0, &lock_providers.1[..]),
            ("SELECT provider_uuid, aggregate FROM provider_aggregates WHERE provider_uuid = ANY($1)", &[&providers]),
            ("SELECT provider_uuid, reservable, capabilities FROM hosts WHERE provider_uuid = ANY($1)", &[&providers]),
            ("SELECT provider_uuid FROM host_holds WHERE provider_uuid = ANY($1)", &[&providers]),
        ],
    )
    .await?;
    for p in found[0].iter().map(lock::LockedProvider::from_row) {
        state.aggregates.insert(p.uuid, BTreeSet::new());
    }
    for r in &found[1] {
        state.aggregates.entry(r.get("provider_uuid")).or_default().insert(r.get("aggregate"));
    }
    for r in &found[2] {
        let caps: Value = r.get("capabilities");
        state
            .hosts
            .insert(r.get("provider_uuid"), (r.get("reservable"), serde_json::from_value(caps).unwrap_or_default()));
    }
    for r in &found[3] {
        state.holds.insert(r.get("provider_uuid"));
    }
    Ok(state)
}

/// The events that carry out `effect`, updating `state` so the next effect
/// in the batch sees it.
pub(super) fn effect_events(
    effect: &Effect,
    lease: Uuid,
    state: &mut HostState,
    at: DateTime<Utc>,
    out: &mut Vec<Event>,
) {
    match effect {
        Effect::MoveHosts { hosts, leave, join } => {
            for h in hosts {
                let Some(aggs) = state.aggregates.get_mut(h) else { continue };
                let before = aggs.clone();
                for l in leave {
                    aggs.remove(l);
                }
                if let Some(j) = join {
                    aggs.insert(*j);
                }
                if *aggs != before {
                    out.push(Event::ProviderAggregatesReplaced {
                        provider: *h,
                        aggregates: aggs.clone(),
                        bump: true,
                        at,
                    });
                }
            }
        }
        Effect::DeleteConsumers { consumers } => {
            for c in consumers {
                if let Some((project_id, user_id, consumer_type)) = state.consumers.remove(c) {
                    out.push(Event::AllocationsReplaced {
                        consumer: *c,
                        project_id,
                        user_id,
                        consumer_type,
                        allocations: Vec::new(),
                        // As Placement's delete: no provider generation moves.
                        providers_bumped: Some(Vec::new()),
                        at,
                    });
                    // What it drew from a reservation's hold goes with it.
                    for slot in state.draws.remove(c).unwrap_or_default() {
                        out.push(Event::ReservationDrawn { slot, consumer: *c, resources: BTreeMap::new(), at });
                    }
                }
            }
        }
        Effect::SetReservable { hosts, reservable } => {
            for h in hosts {
                if let Some((r, caps)) = state.hosts.get_mut(h) {
                    if *r != *reservable {
                        *r = *reservable;
                        out.push(Event::HostUpdated {
                            provider: *h,
                            reservable: *reservable,
                            capabilities: caps.clone(),
                            at,
                        });
                    }
                }
            }
        }
        Effect::HoldHosts { hosts, pool, until, for_s } => {
            let until =
                until.or_else(|| for_s.and_then(|s| at.checked_add_signed(chrono::Duration::seconds(s as i64))));
            for h in hosts {
                if state.hosts.contains_key(h) {
                    state.holds.insert(*h);
                    out.push(Event::HostHeld { provider: *h, pool: *pool, until, lease, at });
                }
            }
        }
        Effect::ReleaseHolds { hosts } => {
            for h in hosts {
                if state.holds.remove(h) {
                    out.push(Event::HostHoldReleased { provider: *h, at });
                }
            }
        }
        // Unusable from now on; the manager's next heal moves what they hold.
        Effect::FailHosts { hosts, reason } => {
            for h in hosts.iter().filter(|h| state.hosts.contains_key(h)) {
                out.push(Event::HostDisabled { provider: *h, disabled: true, reason: Some(reason.clone()), at });
            }
        }
    }
}
