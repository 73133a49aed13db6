//! Hosts held back at a lease's end (`recycle`), and returning them.

use berth_core::lease::FREE_POOL;
use berth_core::lease_event::{self, Effect};
use berth_core::EventMeta;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::effects::{effect_events, lock_effects};
use crate::commands::{now, record};
use crate::{Store, StoreError};

/// A host held back at a lease's end whose time to return has come.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldHost {
    pub provider: Uuid,
    pub name: String,
    pub pool: Uuid,
    pub until: Option<DateTime<Utc>>,
    pub lease: Uuid,
    /// Consumers other than reservations holding it now.
    pub others: Vec<Uuid>,
}

impl Store {
    /// Hosts held back with `recycle` whose time has come: their grace
    /// period is over, or nothing but reservations holds them now.
    pub async fn held_hosts_due(&self) -> Result<Vec<HeldHost>, berth_core::Error> {
        let c = self.client().await?;
        let at = now(&c).await?;
        let rows = c
            .query(
                "SELECT h.provider_uuid, p.name, h.pool, h.until, h.lease_id,
                        coalesce((SELECT array_agg(DISTINCT a.consumer_uuid) FROM allocations a
                                  JOIN consumers c ON c.uuid = a.consumer_uuid
                                  WHERE a.provider_uuid = h.provider_uuid
                                    AND c.consumer_type IS DISTINCT FROM 'RESERVATION'
                                    AND (a.during @> $1::timestamptz OR a.consumer_uuid IN (
                                        SELECT d.consumer_uuid FROM reservation_draws d
                                        JOIN reservation_slots s ON s.consumer_uuid = d.slot_consumer
                                        JOIN reservations r ON r.id = s.reservation_id
                                        WHERE r.lease_id = h.lease_id))), '{}') AS others
                 FROM host_holds h JOIN providers p ON p.uuid = h.provider_uuid
                 WHERE h.until IS NOT NULL ORDER BY h.until",
                &[&at],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| HeldHost {
                provider: r.get("provider_uuid"),
                name: r.get("name"),
                pool: r.get("pool"),
                until: r.get("until"),
                lease: r.get("lease_id"),
                others: r.get("others"),
            })
            .filter(|h| h.others.is_empty() || h.until.is_some_and(|u| u <= at))
            .collect())
    }

    /// Returns a held-back host to the free pool, reservable, after applying
    /// `effects` (e.g. its other consumers deleted). Nothing happens when
    /// the host is no longer held (another manager returned it first).
    pub async fn return_held_host(
        &self,
        actor: &str,
        provider: Uuid,
        effects: &[Effect],
    ) -> Result<bool, berth_core::Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let mut all: Vec<Effect> = effects.to_vec();
            all.push(Effect::MoveHosts {
                hosts: vec![provider],
                leave: vec![lease_event::RECYCLE_POOL, lease_event::SHARED_POOL],
                join: Some(FREE_POOL),
            });
            all.push(Effect::SetReservable { hosts: vec![provider], reservable: true });
            all.push(Effect::ReleaseHolds { hosts: vec![provider] });
            let refs: Vec<&Effect> = all.iter().collect();
            let mut state = lock_effects(tx, &refs).await?;
            let hold = tx.query_opt("SELECT lease_id FROM host_holds WHERE provider_uuid = $1", &[&provider]).await?;
            let Some(hold) = hold else {
                return Ok(false);
            };
            let lease: Uuid = hold.get("lease_id");
            let mut out = Vec::new();
            for e in &all {
                effect_events(e, lease, &mut state, at, &mut out);
            }
            record(tx, &EventMeta { actor: Some(actor.to_string()), ..Default::default() }, &out).await?;
            Ok(true)
        })
    }
}
