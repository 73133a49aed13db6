//! Recording a call owed to plugins once the manager made it: `on_heal`
//! after a heal moved slots of a started lease, `on_update` after a started
//! lease's sharing changed. Either is recorded once, with the effects its
//! hooks asked for, under its lease's lock.

use berth_core::lease_event::HookResult;
use berth_core::{Error, Event, EventMeta};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::effects::{effect_events, lock_effects};
use crate::commands::{now, record};
use crate::{lock, Store};

/// Which call was owed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Owed {
    Heal,
    Update,
}

impl Owed {
    /// The lease of call `$1`, while it is owed.
    fn owed(self) -> &'static str {
        match self {
            Owed::Heal => "SELECT lease_id FROM heal_hooks WHERE id = $1",
            Owed::Update => "SELECT lease_id FROM update_hooks WHERE id = $1",
        }
    }

    fn cause(self, id: Uuid) -> String {
        match self {
            Owed::Heal => format!("heal:{id}"),
            Owed::Update => format!("update:{id}"),
        }
    }

    fn finished(self, id: Uuid, lease: Uuid, hooks: Vec<HookResult>, at: DateTime<Utc>) -> Event {
        match self {
            Owed::Heal => Event::HealHookFinished { id, lease, hooks, at },
            Owed::Update => Event::UpdateHookFinished { id, lease, hooks, at },
        }
    }
}

impl Store {
    /// Records the call `id` made, with what its hooks did and the effects
    /// they asked for. False when it was already recorded (by another
    /// manager) or its lease is gone.
    pub(super) async fn finish_owed(
        &self,
        owed: Owed,
        actor: &str,
        id: Uuid,
        hooks: Vec<HookResult>,
    ) -> Result<bool, Error> {
        let meta = EventMeta { actor: Some(actor.to_string()), causation: Some(owed.cause(id)), ..Default::default() };
        crate::tx::command!(self, |tx| {
            let Some(row) = tx.query_opt(owed.owed(), &[&id]).await? else {
                return Ok(false);
            };
            let lease: Uuid = row.get("lease_id");
            lock::lease(tx, lease).await?;
            // Under the lease's lock: still owed?
            if tx.query_opt(owed.owed(), &[&id]).await?.is_none() {
                return Ok(false);
            }
            let at = now(tx).await?;
            let effects: Vec<_> = hooks.iter().filter(|h| h.ok).flat_map(|h| h.effects.iter()).collect();
            let mut state = lock_effects(tx, &effects).await?;
            let mut events = Vec::new();
            for e in &effects {
                effect_events(e, lease, &mut state, at, &mut events);
            }
            events.push(owed.finished(id, lease, hooks.clone(), at));
            record(tx, &meta, &events).await?;
            Ok(true)
        })
    }
}
