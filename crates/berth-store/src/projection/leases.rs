//! Applying lease and host events to their projections.

use berth_core::lease::LeaseRecord;
use berth_core::Event;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use std::collections::BTreeMap;
use uuid::Uuid;

use tokio_postgres::types::ToSql;

use crate::{sql, StoreError};

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::LeaseCreated { lease, at } => lease_created(c, lease, at).await?,
        Event::LeaseUpdated { lease, at } => lease_updated(c, lease, at).await?,
        Event::LeaseDeleted { id, .. } => lease_deleted(c, id).await?,
        Event::LeaseStatusChanged { id, status, degraded, at } => {
            c.execute(
                "UPDATE leases SET status = $2, degraded = $3, updated_at = $4 WHERE id = $1",
                &[id, &status.as_str(), degraded, at],
            )
            .await?;
        }
        Event::ReservationStatusChanged { lease, reservation, status, at } => {
            c.execute(
                "UPDATE reservations SET status = $3, updated_at = $4 WHERE id = $2 AND lease_id = $1",
                &[lease, reservation, &status.as_str(), at],
            )
            .await?;
        }
        Event::LeaseEventChanged { lease, event, status, attempts, last_error, claimed_by, claim_expires_at, at } => {
            c.execute(
                "UPDATE lease_events SET status = $3, attempts = $4, last_error = $5, claimed_by = $6,
                        claim_expires_at = $7, updated_at = $8
                 WHERE id = $2 AND lease_id = $1",
                &[lease, event, &status.as_str(), attempts, last_error, claimed_by, claim_expires_at, at],
            )
            .await?;
        }
        Event::LeaseRecovered { id, status, reservations, at } => {
            c.execute(
                "UPDATE leases SET status = $2, degraded = false, updated_at = $3 WHERE id = $1",
                &[id, &status.as_str(), at],
            )
            .await?;
            for (reservation, status) in reservations {
                c.execute(
                    "UPDATE reservations SET status = $3, updated_at = $4 WHERE id = $2 AND lease_id = $1",
                    &[id, reservation, &status.as_str(), at],
                )
                .await?;
            }
        }
        Event::HostEnrolled { provider, reservable, capabilities, at } => {
            c.execute(
                "INSERT INTO hosts (provider_uuid, reservable, capabilities, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $4)",
                &[provider, reservable, &serde_json::to_value(capabilities).expect("json"), at],
            )
            .await?;
            note_properties(c, capabilities.keys(), at).await?;
        }
        Event::HostUpdated { provider, reservable, capabilities, at } => {
            c.execute(
                "UPDATE hosts SET reservable = $2, capabilities = $3, updated_at = $4 WHERE provider_uuid = $1",
                &[provider, reservable, &serde_json::to_value(capabilities).expect("json"), at],
            )
            .await?;
            note_properties(c, capabilities.keys(), at).await?;
        }
        Event::HostRemoved { provider, .. } => {
            c.execute("DELETE FROM hosts WHERE provider_uuid = $1", &[provider]).await?;
        }
        Event::HostPropertyChanged { name, private, at } => {
            c.execute(
                "INSERT INTO host_properties (name, private, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET private = $2, updated_at = $3",
                &[name, private, at],
            )
            .await?;
        }
        Event::ReservationDrawn { slot, consumer, resources, .. } => {
            reservation_drawn(c, slot, consumer, resources).await?;
        }
        _ => unreachable!("not a lease or host event"),
    }
    Ok(())
}

/// A new lease, its reservations, their slots and its lease events: four
/// prepared statements sent together.
async fn lease_created(c: &impl GenericClient, lease: &LeaseRecord, at: &DateTime<Utc>) -> Result<(), StoreError> {
    let status = lease.status.as_str();
    let row: [&(dyn ToSql + Sync); 10] = [
        &lease.id,
        &lease.name,
        &lease.project_id,
        &lease.user_id,
        &lease.start,
        &lease.end,
        &status,
        &lease.degraded,
        &lease.recurrence_id,
        at,
    ];
    let r = ReservationColumns::of(lease);
    let e_id: Vec<Uuid> = lease.events.iter().map(|e| e.id).collect();
    let e_type: Vec<&str> = lease.events.iter().map(|e| e.event_type.as_str()).collect();
    let e_time: Vec<DateTime<Utc>> = lease.events.iter().map(|e| e.time).collect();
    let e_status: Vec<&str> = lease.events.iter().map(|e| e.status.as_str()).collect();
    let events: [&(dyn ToSql + Sync); 6] = [&lease.id, &e_id, &e_type, &e_time, &e_status, at];
    let (reservations, slots) = (r.reservation_params(&lease.id, at), r.slot_params());
    sql::pipeline(
        c,
        [
            (INSERT_LEASE, &row[..]),
            (INSERT_RESERVATIONS, &reservations[..]),
            (INSERT_SLOTS, &slots[..]),
            (INSERT_LEASE_EVENTS, &events[..]),
        ],
    )
    .await?;
    Ok(())
}

const INSERT_LEASE: &str =
    "INSERT INTO leases (id, name, project_id, user_id, start_at, end_at, status, degraded, recurrence_id,
                         created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)";

const INSERT_RESERVATIONS: &str =
    "INSERT INTO reservations (id, lease_id, position, resource_type, resource_id, status, params, created_at,
                               updated_at)
     SELECT r.id, $1, r.position, r.resource_type, r.resource_id, r.status, r.params, r.created_at, $8
     FROM unnest($2::uuid[], $3::int4[], $4::text[], $5::uuid[], $6::text[], $7::jsonb[], $9::timestamptz[])
          WITH ORDINALITY AS r(id, position, resource_type, resource_id, status, params, created_at, ord)
     ORDER BY r.ord";

const INSERT_SLOTS: &str = "INSERT INTO reservation_slots (reservation_id, consumer_uuid, provider_uuid, resources)
     SELECT s.r, s.c, s.p, s.res FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::jsonb[])
          WITH ORDINALITY AS s(r, c, p, res, ord)
     ORDER BY s.ord";

const INSERT_LEASE_EVENTS: &str =
    "INSERT INTO lease_events (id, lease_id, event_type, time, status, created_at, updated_at)
     SELECT e.id, $1, e.t, e.time, e.status, $6, $6
     FROM unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::text[]) WITH ORDINALITY AS e(id, t, time, status, ord)
     ORDER BY e.ord";

/// A lease's reservations and their slots as the columns of
/// [`INSERT_RESERVATIONS`] and [`INSERT_SLOTS`], in order.
struct ReservationColumns<'a> {
    id: Vec<Uuid>,
    position: Vec<i32>,
    resource_type: Vec<&'a str>,
    resource_id: Vec<Uuid>,
    status: Vec<&'a str>,
    params: Vec<&'a serde_json::Value>,
    created_at: Vec<DateTime<Utc>>,
    s_reservation: Vec<Uuid>,
    s_consumer: Vec<Uuid>,
    s_provider: Vec<Uuid>,
    s_resources: Vec<serde_json::Value>,
}

impl<'a> ReservationColumns<'a> {
    fn of(lease: &'a LeaseRecord) -> ReservationColumns<'a> {
        let rs = &lease.reservations;
        let slots = || rs.iter().flat_map(|r| r.slots.iter().map(move |s| (r, s)));
        ReservationColumns {
            id: rs.iter().map(|r| r.id).collect(),
            position: (0..rs.len() as i32).collect(),
            resource_type: rs.iter().map(|r| r.resource_type.as_str()).collect(),
            resource_id: rs.iter().map(|r| r.resource_id).collect(),
            status: rs.iter().map(|r| r.status.as_str()).collect(),
            params: rs.iter().map(|r| &r.params).collect(),
            created_at: rs.iter().map(|r| r.created_at).collect(),
            s_reservation: slots().map(|(r, _)| r.id).collect(),
            s_consumer: slots().map(|(_, s)| s.consumer).collect(),
            s_provider: slots().map(|(_, s)| s.provider).collect(),
            s_resources: slots().map(|(_, s)| serde_json::to_value(&s.resources).expect("json")).collect(),
        }
    }

    fn reservation_params<'b>(&'b self, lease: &'b Uuid, at: &'b DateTime<Utc>) -> [&'b (dyn ToSql + Sync); 9] {
        [
            lease,
            &self.id,
            &self.position,
            &self.resource_type,
            &self.resource_id,
            &self.status,
            &self.params,
            at,
            &self.created_at,
        ]
    }

    fn slot_params(&self) -> [&(dyn ToSql + Sync); 4] {
        [&self.s_reservation, &self.s_consumer, &self.s_provider, &self.s_resources]
    }
}

async fn lease_updated(c: &impl GenericClient, lease: &LeaseRecord, at: &DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(
        "UPDATE leases SET name = $2, start_at = $3, end_at = $4, updated_at = $5 WHERE id = $1",
        &[&lease.id, &lease.name, &lease.start, &lease.end, at],
    )
    .await?;
    delete_reservations(c, &lease.id).await?;
    insert_reservations(c, lease, at).await?;
    // Only the times move: status and claims belong to the manager.
    for e in &lease.events {
        c.execute(
            "UPDATE lease_events SET time = $2, updated_at = $3 WHERE id = $1 AND time <> $2",
            &[&e.id, &e.time, at],
        )
        .await?;
    }
    Ok(())
}

async fn lease_deleted(c: &impl GenericClient, id: &Uuid) -> Result<(), StoreError> {
    c.execute(
        "DELETE FROM reservation_draws WHERE slot_consumer IN (
             SELECT s.consumer_uuid FROM reservation_slots s
             JOIN reservations r ON r.id = s.reservation_id WHERE r.lease_id = $1)",
        &[id],
    )
    .await?;
    delete_reservations(c, id).await?;
    c.execute("DELETE FROM lease_events WHERE lease_id = $1", &[id]).await?;
    c.execute("DELETE FROM leases WHERE id = $1", &[id]).await?;
    Ok(())
}

/// What a consumer draws from a slot; drawing nothing ends the draw.
async fn reservation_drawn(
    c: &impl GenericClient,
    slot: &Uuid,
    consumer: &Uuid,
    resources: &BTreeMap<String, i64>,
) -> Result<(), StoreError> {
    if resources.is_empty() {
        c.execute("DELETE FROM reservation_draws WHERE slot_consumer = $1 AND consumer_uuid = $2", &[slot, consumer])
            .await?;
    } else {
        c.execute(
            "INSERT INTO reservation_draws (slot_consumer, consumer_uuid, resources) VALUES ($1, $2, $3)
             ON CONFLICT (slot_consumer, consumer_uuid) DO UPDATE SET resources = $3",
            &[slot, consumer, &serde_json::to_value(resources).expect("json")],
        )
        .await?;
    }
    Ok(())
}

/// Explicitly, not by cascade: replay's scratch tables have no foreign keys.
async fn delete_reservations(c: &impl GenericClient, lease: &Uuid) -> Result<(), StoreError> {
    c.execute(
        "DELETE FROM reservation_slots WHERE reservation_id IN (SELECT id FROM reservations WHERE lease_id = $1)",
        &[lease],
    )
    .await?;
    c.execute("DELETE FROM reservations WHERE lease_id = $1", &[lease]).await?;
    Ok(())
}

async fn insert_reservations(
    c: &impl GenericClient,
    lease: &LeaseRecord,
    at: &DateTime<Utc>,
) -> Result<(), StoreError> {
    let r = ReservationColumns::of(lease);
    let (reservations, slots) = (r.reservation_params(&lease.id, at), r.slot_params());
    sql::pipeline(c, [(INSERT_RESERVATIONS, &reservations[..]), (INSERT_SLOTS, &slots[..])]).await?;
    Ok(())
}

/// Capability names become listed properties (public until made private).
async fn note_properties<'a>(
    c: &impl GenericClient,
    names: impl Iterator<Item = &'a String>,
    at: &DateTime<Utc>,
) -> Result<(), StoreError> {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if !names.is_empty() {
        c.execute(
            "INSERT INTO host_properties (name, private, updated_at) SELECT unnest($1::text[]), false, $2
             ON CONFLICT (name) DO NOTHING",
            &[&names, at],
        )
        .await?;
    }
    Ok(())
}
