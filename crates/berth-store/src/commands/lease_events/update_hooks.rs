//! The `on_update` calls owed to plugins after a started lease's sharing
//! changed: the manager reads them, calls the plugin, and records the
//! outcome (its effects) here, once. A call waits for its lease's start to
//! be done (the pool exists); one whose lease has ended since is moot.

use berth_core::lease_event::HookResult;
use berth_core::Error;
use uuid::Uuid;

use crate::{Store, StoreError};

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

    /// Records the `on_update` call `id` made (owed.rs).
    pub async fn finish_update_hook(&self, actor: &str, id: Uuid, hooks: Vec<HookResult>) -> Result<bool, Error> {
        self.finish_owed(super::owed::Owed::Update, actor, id, hooks).await
    }
}
