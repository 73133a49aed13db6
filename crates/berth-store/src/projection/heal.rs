//! Applying healing's events: unusable hosts, reservations' slots moved and
//! their flags, the `on_heal` calls owed, and maintenance windows.

use berth_core::Event;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::StoreError;

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::HostDisabled { provider, disabled, reason, at } => {
            c.execute(
                "UPDATE hosts SET disabled = $2, disabled_reason = $3, updated_at = $4 WHERE provider_uuid = $1",
                &[provider, disabled, reason, at],
            )
            .await?;
        }
        Event::ReservationHealed { lease, reservation, moves, missing_resources, resources_changed, hook, at } => {
            let consumers: Vec<Uuid> = moves.iter().map(|m| m.consumer).collect();
            let to: Vec<Uuid> = moves.iter().map(|m| m.to).collect();
            let resources: Vec<serde_json::Value> =
                moves.iter().map(|m| serde_json::to_value(&m.resources).expect("json")).collect();
            c.execute(
                "UPDATE reservation_slots s SET provider_uuid = m.dest, resources = m.resources
                 FROM unnest($2::uuid[], $3::uuid[], $4::jsonb[]) AS m(consumer, dest, resources)
                 WHERE s.reservation_id = $1 AND s.consumer_uuid = m.consumer",
                &[reservation, &consumers, &to, &resources],
            )
            .await?;
            c.execute(
                "UPDATE reservations SET missing_resources = $3, resources_changed = $4, updated_at = $5
                 WHERE id = $2 AND lease_id = $1",
                &[lease, reservation, missing_resources, resources_changed, at],
            )
            .await?;
            if let Some(id) = hook {
                c.execute(
                    "INSERT INTO heal_hooks (id, lease_id, reservation_id, moves, created_at) VALUES ($1, $2, $3, $4, $5)",
                    &[id, lease, reservation, &serde_json::to_value(moves).expect("json"), at],
                )
                .await?;
            }
        }
        Event::ReservationUnhealed { lease, reservation, at, .. } => {
            c.execute(
                "UPDATE reservations SET missing_resources = true, updated_at = $3 WHERE id = $2 AND lease_id = $1",
                &[lease, reservation, at],
            )
            .await?;
        }
        Event::MaintenanceScheduled { id, hosts, window, heal, reason, at } => {
            c.execute(
                "INSERT INTO maintenance_windows (id, provider_uuid, during, heal, reason, created_at)
                 SELECT $1, h, tstzrange($3, $4, '[)'), $5, $6, $7 FROM unnest($2::uuid[]) AS h",
                &[id, hosts, &window.start, &window.end, heal, reason, at],
            )
            .await?;
        }
        Event::MaintenanceCancelled { id, .. } => {
            c.execute("DELETE FROM maintenance_windows WHERE id = $1", &[id]).await?;
        }
        Event::HealHookFinished { id, .. } => {
            c.execute("DELETE FROM heal_hooks WHERE id = $1", &[id]).await?;
        }
        _ => unreachable!("not a healing event"),
    }
    Ok(())
}
