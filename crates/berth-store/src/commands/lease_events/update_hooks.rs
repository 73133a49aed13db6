//! The `on_update` calls owed to plugins after a started lease's sharing
//! changed: the manager reads them, calls the plugin, and records the
//! outcome (its effects) here, once. A call waits for its lease's start to
//! be done (the pool exists); one whose lease has ended since is moot.

use berth_core::lease_event::HookResult;
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use super::effects::{effect_events, lock_effects};
use crate::commands::{now, record};
use crate::{lock, Store, StoreError};

/// One `on_update` call owed.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateHook {
    pub id: Uuid,
    pub lease: Uuid,
    pub reservation: Uuid,
    /// Its lease's end has run (or is running): record it without a call.
    pub moot: bool,
}

/// The calls owed whose lease has started (or ended), oldest first.
const DUE: &str = "SELECT h.id, h.lease_id, h.reservation_id,
        EXISTS (SELECT 1 FROM lease_events e WHERE e.lease_id = h.lease_id AND e.event_type = 'end_lease'
                AND e.status <> 'UNDONE') AS moot
     FROM update_hooks h
     WHERE EXISTS (SELECT 1 FROM lease_events e WHERE e.lease_id = h.lease_id
                   AND ((e.event_type = 'start_lease' AND e.status = 'DONE')
                        OR (e.event_type = 'end_lease' AND e.status <> 'UNDONE')))
     ORDER BY h.created_at, h.id LIMIT 100";

impl Store {
    /// The `on_update` calls due now, oldest first.
    pub async fn update_hooks_due(&self) -> Result<Vec<UpdateHook>, Error> {
        let c = self.client().await?;
        let rows = c.query(DUE, &[]).await.map_err(StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| UpdateHook {
                id: r.get("id"),
                lease: r.get("lease_id"),
                reservation: r.get("reservation_id"),
                moot: r.get("moot"),
            })
            .collect())
    }

    /// Records the `on_update` call `id` made (or found moot), with what
    /// its hooks did and the effects they asked for. False when it was
    /// already recorded (by another manager) or its lease is gone.
    pub async fn finish_update_hook(&self, actor: &str, id: Uuid, hooks: Vec<HookResult>) -> Result<bool, Error> {
        let meta =
            EventMeta { actor: Some(actor.to_string()), causation: Some(format!("update:{id}")), ..Default::default() };
        crate::tx::command!(self, |tx| {
            let Some(row) = tx.query_opt("SELECT lease_id FROM update_hooks WHERE id = $1", &[&id]).await? else {
                return Ok(false);
            };
            let lease: Uuid = row.get("lease_id");
            lock::lease(tx, lease).await?;
            // Under the lease's lock: still owed?
            if tx.query_opt("SELECT 1 FROM update_hooks WHERE id = $1", &[&id]).await?.is_none() {
                return Ok(false);
            }
            let at = now(tx).await?;
            let effects: Vec<_> = hooks.iter().filter(|h| h.ok).flat_map(|h| h.effects.iter()).collect();
            let mut state = lock_effects(tx, &effects).await?;
            let mut events = Vec::new();
            for e in &effects {
                effect_events(e, lease, &mut state, at, &mut events);
            }
            events.push(Event::UpdateHookFinished { id, lease, hooks: hooks.clone(), at });
            record(tx, &meta, &events).await?;
            Ok(true)
        })
    }
}
