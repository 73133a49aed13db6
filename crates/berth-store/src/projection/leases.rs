//! Applying lease and host events to their projections.

use berth_core::lease::{LeaseRecord, ReservationRecord};
use berth_core::Event;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::StoreError;

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

pub(super) async fn lease_created(
    c: &impl GenericClient,
    lease: &LeaseRecord,
    at: &DateTime<Utc>,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO leases (id, name, project_id, user_id, start_at, end_at, status, degraded, recurrence_id,
                             time_zone, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)",
        &[
            &lease.id,
            &lease.name,
            &lease.project_id,
            &lease.user_id,
            &lease.start,
            &lease.end,
            &lease.status.as_str(),
            &lease.degraded,
            &lease.recurrence_id,
            &lease.time_zone,
            at,
        ],
    )
    .await?;
    insert_reservations(c, lease, at).await?;
    for e in &lease.events {
        c.execute(
            "INSERT INTO lease_events (id, lease_id, event_type, time, status, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
            &[&e.id, &lease.id, &e.event_type.as_str(), &e.time, &e.status.as_str(), at],
        )
        .await?;
    }
    Ok(())
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
    // An on_heal call owed to a lease that is gone is owed no more.
    c.execute("DELETE FROM heal_hooks WHERE lease_id = $1", &[id]).await?;
    super::shares::lease_deleted(c, id).await?;
    // Its transfer offer, if any, goes with it.
    c.execute("DELETE FROM lease_transfers WHERE lease_id = $1", &[id]).await?;
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
    for (position, r) in lease.reservations.iter().enumerate() {
        insert_reservation(c, lease, position as i32, r, at).await?;
    }
    Ok(())
}

async fn insert_reservation(
    c: &impl GenericClient,
    lease: &LeaseRecord,
    position: i32,
    r: &ReservationRecord,
    at: &DateTime<Utc>,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO reservations (id, lease_id, position, resource_type, resource_id, status, params, created_at, updated_at,
                                   missing_resources, resources_changed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        &[
            &r.id,
            &lease.id,
            &position,
            &r.resource_type,
            &r.resource_id,
            &r.status.as_str(),
            &r.params,
            &r.created_at,
            at,
            &r.missing_resources,
            &r.resources_changed,
        ],
    )
    .await?;
    if !r.slots.is_empty() {
        let consumers: Vec<uuid::Uuid> = r.slots.iter().map(|s| s.consumer).collect();
        let providers: Vec<uuid::Uuid> = r.slots.iter().map(|s| s.provider).collect();
        let resources: Vec<serde_json::Value> =
            r.slots.iter().map(|s| serde_json::to_value(&s.resources).expect("json")).collect();
        c.execute(
            "INSERT INTO reservation_slots (reservation_id, consumer_uuid, provider_uuid, resources)
             SELECT $1, * FROM unnest($2::uuid[], $3::uuid[], $4::jsonb[])",
            &[&r.id, &consumers, &providers, &resources],
        )
        .await?;
    }
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

/// New leases' rows, column by column, with their reservations' classes:
/// a run of lease creations written in one round trip
/// (`projection::apply_creations`), the same rows as [`apply`] writes one
/// event at a time.
#[derive(Default)]
pub(super) struct Created<'a> {
    classes: Vec<&'a str>,
    l_id: Vec<Uuid>,
    l_name: Vec<&'a str>,
    l_project: Vec<&'a str>,
    l_user: Vec<&'a str>,
    l_start: Vec<DateTime<Utc>>,
    l_end: Vec<DateTime<Utc>>,
    l_status: Vec<&'static str>,
    l_degraded: Vec<bool>,
    l_recurrence: Vec<Option<Uuid>>,
    l_time_zone: Vec<Option<&'a str>>,
    l_at: Vec<DateTime<Utc>>,
    r_id: Vec<Uuid>,
    r_lease: Vec<Uuid>,
    r_position: Vec<i32>,
    r_type: Vec<&'a str>,
    r_resource: Vec<Uuid>,
    r_status: Vec<&'static str>,
    r_params: Vec<&'a serde_json::Value>,
    r_created: Vec<DateTime<Utc>>,
    r_at: Vec<DateTime<Utc>>,
    r_missing: Vec<bool>,
    r_changed: Vec<bool>,
    s_reservation: Vec<Uuid>,
    s_consumer: Vec<Uuid>,
    s_provider: Vec<Uuid>,
    s_resources: Vec<serde_json::Value>,
    e_id: Vec<Uuid>,
    e_lease: Vec<Uuid>,
    e_type: Vec<&'static str>,
    e_time: Vec<DateTime<Utc>>,
    e_status: Vec<&'static str>,
    e_at: Vec<DateTime<Utc>>,
}

const INSERT_CLASSES: &str = "INSERT INTO resource_classes (name, standard) SELECT unnest($1::text[]), false";

const INSERT_LEASES: &str =
    "INSERT INTO leases (id, name, project_id, user_id, start_at, end_at, status, degraded, recurrence_id,
                         time_zone, created_at, updated_at)
     SELECT i, n, p, u, s, e, st, d, r, z, a, a
     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[],
                 $8::bool[], $9::uuid[], $10::text[], $11::timestamptz[]) AS l(i, n, p, u, s, e, st, d, r, z, a)";

const INSERT_RESERVATIONS: &str =
    "INSERT INTO reservations (id, lease_id, position, resource_type, resource_id, status, params, created_at,
                               updated_at, missing_resources, resources_changed)
     SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int4[], $4::text[], $5::uuid[], $6::text[], $7::jsonb[],
                          $8::timestamptz[], $9::timestamptz[], $10::bool[], $11::bool[])";

const INSERT_SLOTS: &str = "INSERT INTO reservation_slots (reservation_id, consumer_uuid, provider_uuid, resources)
     SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::jsonb[])";

const INSERT_LEASE_EVENTS: &str =
    "INSERT INTO lease_events (id, lease_id, event_type, time, status, created_at, updated_at)
     SELECT i, l, t, w, s, a, a
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::text[], $6::timestamptz[])
         AS e(i, l, t, w, s, a)";

impl<'a> Created<'a> {
    /// A reservation's class (`ResourceClassCreated`).
    pub(super) fn class(&mut self, name: &'a str) {
        self.classes.push(name);
    }

    /// A new lease with its reservations, their slots and its lease events
    /// (`LeaseCreated`).
    pub(super) fn lease(&mut self, lease: &'a LeaseRecord, at: DateTime<Utc>) {
        self.l_id.push(lease.id);
        self.l_name.push(&lease.name);
        self.l_project.push(&lease.project_id);
        self.l_user.push(&lease.user_id);
        self.l_start.push(lease.start);
        self.l_end.push(lease.end);
        self.l_status.push(lease.status.as_str());
        self.l_degraded.push(lease.degraded);
        self.l_recurrence.push(lease.recurrence_id);
        self.l_time_zone.push(lease.time_zone.as_deref());
        self.l_at.push(at);
        for (position, r) in lease.reservations.iter().enumerate() {
            self.r_id.push(r.id);
            self.r_lease.push(lease.id);
            self.r_position.push(position as i32);
            self.r_type.push(&r.resource_type);
            self.r_resource.push(r.resource_id);
            self.r_status.push(r.status.as_str());
            self.r_params.push(&r.params);
            self.r_created.push(r.created_at);
            self.r_at.push(at);
            self.r_missing.push(r.missing_resources);
            self.r_changed.push(r.resources_changed);
            for s in &r.slots {
                self.s_reservation.push(r.id);
                self.s_consumer.push(s.consumer);
                self.s_provider.push(s.provider);
                self.s_resources.push(serde_json::to_value(&s.resources).expect("json"));
            }
        }
        for e in &lease.events {
            self.e_id.push(e.id);
            self.e_lease.push(lease.id);
            self.e_type.push(e.event_type.as_str());
            self.e_time.push(e.time);
            self.e_status.push(e.status.as_str());
            self.e_at.push(at);
        }
    }

    /// The statements' parameters, in the order they run: the classes
    /// first, then the leases, before what refers to them.
    pub(super) fn params(&self) -> [(&'static str, Vec<&(dyn ToSql + Sync)>); 5] {
        [
            (INSERT_CLASSES, vec![&self.classes]),
            (
                INSERT_LEASES,
                vec![
                    &self.l_id,
                    &self.l_name,
                    &self.l_project,
                    &self.l_user,
                    &self.l_start,
                    &self.l_end,
                    &self.l_status,
                    &self.l_degraded,
                    &self.l_recurrence,
                    &self.l_time_zone,
                    &self.l_at,
                ],
            ),
            (
                INSERT_RESERVATIONS,
                vec![
                    &self.r_id,
                    &self.r_lease,
                    &self.r_position,
                    &self.r_type,
                    &self.r_resource,
                    &self.r_status,
                    &self.r_params,
                    &self.r_created,
                    &self.r_at,
                    &self.r_missing,
                    &self.r_changed,
                ],
            ),
            (INSERT_SLOTS, vec![&self.s_reservation, &self.s_consumer, &self.s_provider, &self.s_resources]),
            (
                INSERT_LEASE_EVENTS,
                vec![&self.e_id, &self.e_lease, &self.e_type, &self.e_time, &self.e_status, &self.e_at],
            ),
        ]
    }
}
