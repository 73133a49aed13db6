//! The `on_heal` calls owed to plugins after a heal moved slots of a
//! started lease: the manager reads them, calls the plugin, and records the
//! outcome (its effects, e.g. pool moves) here, once.

use std::collections::HashMap;

use berth_core::event::SlotMove;
use berth_core::lease_event::HookResult;
use berth_core::Error;
use uuid::Uuid;

use crate::{Store, StoreError};

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

    /// Records the `on_heal` call `id` made (owed.rs).
    pub async fn finish_heal_hook(&self, actor: &str, id: Uuid, hooks: Vec<HookResult>) -> Result<bool, Error> {
        self.finish_owed(super::owed::Owed::Heal, actor, id, hooks).await
    }
}
