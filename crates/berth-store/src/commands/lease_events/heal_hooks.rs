//! The `on_heal` calls owed to plugins after a heal moved slots of a
//! started lease: the manager reads them, calls the plugin, and records the
//! outcome (its effects, e.g. pool moves) here, once.

use std::collections::HashMap;

use berth_core::event::SlotMove;
use berth_core::lease_event::HookResult;
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use super::effects::{effect_events, lock_effects};
use crate::commands::{now, record};
use crate::{lock, Store, StoreError};

/// One `on_heal` call owed.
#[derive(Debug, Clone, PartialEq)]
pub struct HealHook {
    pub id: Uuid,
    pub lease: Uuid,
    pub reservation: Uuid,
    pub moves: Vec<SlotMove>,
    /// The names of the providers the moves name.
    pub names: HashMap<Uuid, String>,
}

impl Store {
    /// The `on_heal` calls owed, oldest first.
    pub async fn heal_hooks_due(&self) -> Result<Vec<HealHook>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT h.id, h.lease_id, h.reservation_id, h.moves,
                        coalesce((SELECT jsonb_object_agg(p.uuid::text, p.name) FROM providers p
                                  WHERE p.uuid IN (SELECT (m->>'from')::uuid FROM jsonb_array_elements(h.moves) m
                                                   UNION SELECT (m->>'to')::uuid FROM jsonb_array_elements(h.moves) m)),
                                 '{}') AS names
                 FROM heal_hooks h ORDER BY h.created_at, h.id LIMIT 100",
                &[],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| HealHook {
                id: r.get("id"),
                lease: r.get("lease_id"),
                reservation: r.get("reservation_id"),
                moves: serde_json::from_value(r.get("moves")).unwrap_or_default(),
                names: serde_json::from_value(r.get("names")).unwrap_or_default(),
            })
            .collect())
    }

    /// Records the `on_heal` call `id` made, with what its hooks did and
    /// the effects they asked for. False when it was already recorded (by
    /// another manager) or its lease is gone.
    pub async fn finish_heal_hook(&self, actor: &str, id: Uuid, hooks: Vec<HookResult>) -> Result<bool, Error> {
        let meta =
            EventMeta { actor: Some(actor.to_string()), causation: Some(format!("heal:{id}")), ..Default::default() };
        crate::tx::command!(self, |tx| {
            let Some(row) = tx.query_opt("SELECT lease_id FROM heal_hooks WHERE id = $1", &[&id]).await? else {
                return Ok(false);
            };
            let lease: Uuid = row.get("lease_id");
            lock::lease(tx, lease).await?;
            // Under the lease's lock: still owed?
            if tx.query_opt("SELECT 1 FROM heal_hooks WHERE id = $1", &[&id]).await?.is_none() {
                return Ok(false);
            }
            let at = now(tx).await?;
            let effects: Vec<_> = hooks.iter().filter(|h| h.ok).flat_map(|h| h.effects.iter()).collect();
            let mut state = lock_effects(tx, &effects).await?;
            let mut events = Vec::new();
            for e in &effects {
                effect_events(e, lease, &mut state, at, &mut events);
            }
            events.push(Event::HealHookFinished { id, lease, hooks: hooks.clone(), at });
            record(tx, &meta, &events).await?;
            Ok(true)
        })
    }
}
