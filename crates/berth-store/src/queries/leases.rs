//! Reads of leases.

use std::collections::HashMap;

use berth_core::error::ErrorCode;
use berth_core::lease::{
    LeaseEventRecord, LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus, ReservationRecord, ReservationStatus,
    Slot,
};
use berth_core::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::{Store, StoreError};

/// A lease as queries show it: its record plus bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lease {
    pub record: LeaseRecord,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Per reservation, in order: when it last changed.
    pub reservation_updated_at: Vec<DateTime<Utc>>,
    /// Per lease event, in the record's order.
    pub event_details: Vec<LeaseEventDetail>,
    /// The projects it is shared with, sorted (`berth_core::share`).
    pub shared_with: Vec<String>,
    /// The transfer its project offers, if any.
    pub transfer: Option<TransferOffer>,
}

/// A lease offered to another project, until accepted or withdrawn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferOffer {
    pub to_project: String,
    pub offered_by: String,
    pub offered_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseEventDetail {
    pub attempts: i32,
    pub last_error: Option<String>,
    pub claimed_by: Option<String>,
    pub claim_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Which leases a list returns.
#[derive(Debug, Clone, Default)]
pub struct LeaseFilter {
    /// Only this project's (None: every project; for admins).
    pub project_id: Option<String>,
    pub status: Option<LeaseStatus>,
    /// Leases after this place in the list.
    pub after: Option<LeaseKey>,
    pub limit: Option<i64>,
}

/// A lease's place in lists: creation order, the id breaking ties. A list
/// goes on from the key itself, not from its lease, so a lease deleted
/// between two pages ends neither the list nor the paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseKey {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

impl Lease {
    pub fn key(&self) -> LeaseKey {
        LeaseKey { created_at: self.created_at, id: self.record.id }
    }
}

fn db(e: tokio_postgres::Error) -> Error {
    StoreError::from(e).into()
}

/// Loads whole leases by id, in the order given: the leases, their slots,
/// reservations and lease events read in one pipelined round trip (the
/// server runs them in order, in the caller's transaction when there is one).
pub(crate) async fn load_leases(c: &impl GenericClient, ids: &[Uuid]) -> Result<Vec<Lease>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let [rows, slot_rows, reservation_rows, event_rows, share_rows] = crate::sql::pipeline(
        c,
        [
            (
                "SELECT l.id, l.name, l.project_id, l.user_id, l.start_at, l.end_at, l.status, l.degraded,
                        l.recurrence_id, l.time_zone, l.created_at, l.updated_at,
                        t.to_project, t.offered_by, t.offered_at
                 FROM leases l LEFT JOIN lease_transfers t ON t.lease_id = l.id WHERE l.id = ANY($1)",
                &[&ids],
            ),
            (
                "SELECT s.reservation_id, s.consumer_uuid, s.provider_uuid, s.resources
                 FROM reservation_slots s JOIN reservations r ON r.id = s.reservation_id
                 WHERE r.lease_id = ANY($1) ORDER BY s.reservation_id, s.provider_uuid, s.consumer_uuid",
                &[&ids],
            ),
            (
                "SELECT lease_id, id, resource_type, resource_id, status, params, created_at, updated_at,
                        missing_resources, resources_changed
                 FROM reservations WHERE lease_id = ANY($1) ORDER BY lease_id, position",
                &[&ids],
            ),
            (
                "SELECT lease_id, id, event_type, time, status, attempts, last_error, claimed_by, claim_expires_at,
                        created_at, updated_at
                 FROM lease_events WHERE lease_id = ANY($1)
                 ORDER BY lease_id,
                          CASE event_type WHEN 'start_lease' THEN 0 WHEN 'before_end_lease' THEN 1 ELSE 2 END, time",
                &[&ids],
            ),
            (
                "SELECT lease_id, project_id FROM lease_shares WHERE lease_id = ANY($1) ORDER BY lease_id, project_id",
                &[&ids],
            ),
        ],
    )
    .await?;
    let mut leases: HashMap<Uuid, Lease> = HashMap::new();
    for r in rows {
        let record = lease_of(&r);
        leases.insert(
            record.id,
            Lease {
                record,
                created_at: r.get("created_at"),
                updated_at: r.get("updated_at"),
                reservation_updated_at: Vec::new(),
                event_details: Vec::new(),
                shared_with: Vec::new(),
                transfer: transfer_of(&r),
            },
        );
    }
    for r in &share_rows {
        if let Some(l) = leases.get_mut(&r.get::<_, Uuid>("lease_id")) {
            l.shared_with.push(r.get("project_id"));
        }
    }
    add_reservations(&reservation_rows, slots_by_reservation(&slot_rows), &mut leases);
    add_events(&event_rows, &mut leases);
    Ok(ids.iter().filter_map(|id| leases.remove(id)).collect())
}

/// The offer a lease's row joins, if any.
fn transfer_of(r: &Row) -> Option<TransferOffer> {
    let to_project: Option<String> = r.get("to_project");
    Some(TransferOffer { to_project: to_project?, offered_by: r.get("offered_by"), offered_at: r.get("offered_at") })
}

/// The slots of the leases' reservations, by reservation, from rows of
/// `reservation_id`, `consumer_uuid`, `provider_uuid` and `resources`.
pub(crate) fn slots_by_reservation(rows: &[Row]) -> HashMap<Uuid, Vec<Slot>> {
    let mut slots: HashMap<Uuid, Vec<Slot>> = HashMap::new();
    for r in rows {
        let resources: Value = r.get("resources");
        slots.entry(r.get("reservation_id")).or_default().push(Slot {
            consumer: r.get("consumer_uuid"),
            provider: r.get("provider_uuid"),
            resources: serde_json::from_value(resources).unwrap_or_default(),
        });
    }
    slots
}

/// Adds their reservations, in order, with `slots`, to `leases`.
fn add_reservations(rows: &[Row], mut slots: HashMap<Uuid, Vec<Slot>>, leases: &mut HashMap<Uuid, Lease>) {
    for r in rows {
        let lease: Uuid = r.get("lease_id");
        let id: Uuid = r.get("id");
        let status: String = r.get("status");
        if let Some(l) = leases.get_mut(&lease) {
            l.record.reservations.push(ReservationRecord {
                id,
                resource_type: r.get("resource_type"),
                resource_id: r.get("resource_id"),
                status: ReservationStatus::parse(&status).unwrap_or(ReservationStatus::Error),
                params: r.get("params"),
                slots: slots.remove(&id).unwrap_or_default(),
                created_at: r.get("created_at"),
                missing_resources: r.get("missing_resources"),
                resources_changed: r.get("resources_changed"),
            });
            l.reservation_updated_at.push(r.get("updated_at"));
        }
    }
}

/// Adds their lease events, in firing order, to `leases`.
fn add_events(rows: &[Row], leases: &mut HashMap<Uuid, Lease>) {
    for r in rows {
        let lease: Uuid = r.get("lease_id");
        let event_type: String = r.get("event_type");
        let status: String = r.get("status");
        if let Some(l) = leases.get_mut(&lease) {
            l.record.events.push(LeaseEventRecord {
                id: r.get("id"),
                event_type: LeaseEventType::parse(&event_type).unwrap_or(LeaseEventType::EndLease),
                time: r.get("time"),
                status: LeaseEventStatus::parse(&status).unwrap_or(LeaseEventStatus::Error),
            });
            l.event_details.push(LeaseEventDetail {
                attempts: r.get("attempts"),
                last_error: r.get("last_error"),
                claimed_by: r.get("claimed_by"),
                claim_expires_at: r.get("claim_expires_at"),
                created_at: r.get("created_at"),
                updated_at: r.get("updated_at"),
            });
        }
    }
}

/// A lease as [`load_leases`] reads it right after the command that made
/// `record` at `at` commits: slots in the order read, every time `at`, no
/// attempt made.
pub(crate) fn as_created(mut record: LeaseRecord, at: DateTime<Utc>) -> Lease {
    for r in &mut record.reservations {
        r.slots.sort_by_key(|s| (s.provider, s.consumer));
    }
    let event_details = record
        .events
        .iter()
        .map(|_| LeaseEventDetail {
            attempts: 0,
            last_error: None,
            claimed_by: None,
            claim_expires_at: None,
            created_at: at,
            updated_at: at,
        })
        .collect();
    Lease {
        reservation_updated_at: vec![at; record.reservations.len()],
        record,
        created_at: at,
        updated_at: at,
        event_details,
        shared_with: Vec::new(),
        transfer: None,
    }
}

/// Not found unless the lease exists and `project` (None: admin) may see it.
pub(crate) fn visible(lease: Option<Lease>, id: Uuid, project: Option<&str>) -> Result<Lease, Error> {
    match lease {
        Some(l) if project.is_none_or(|p| p == l.record.project_id) => Ok(l),
        _ => Err(Error::not_found(ErrorCode::LeaseNotFound, format!("lease {id} could not be found"))),
    }
}

impl Store {
    /// One lease, if `project` (None: admin) may see it.
    pub async fn lease(&self, id: Uuid, project: Option<&str>) -> Result<Lease, Error> {
        let c = self.client().await?;
        let mut found = load_leases(&c, &[id]).await?;
        visible(found.pop(), id, project)
    }

    /// The place of lease `marker` in lists, if `project` (None: every
    /// project) may see it.
    pub async fn lease_key(&self, marker: Uuid, project: Option<&str>) -> Result<LeaseKey, Error> {
        let c = self.read_client().await?;
        let row = c
            .query_opt(
                "SELECT created_at FROM leases WHERE id = $1 AND ($2::text IS NULL OR project_id = $2)",
                &[&marker, &project],
            )
            .await
            .map_err(db)?;
        match row {
            Some(r) => Ok(LeaseKey { created_at: r.get("created_at"), id: marker }),
            None => Err(Error::invalid(ErrorCode::InvalidLease, format!("marker {marker} is not a lease you can see"))),
        }
    }

    /// Leases in creation order, filtered: a keyset read on
    /// `leases_created` (or `leases_project_created`), so a page costs the
    /// same however many leases come before it.
    pub async fn leases(&self, filter: &LeaseFilter) -> Result<Vec<Lease>, Error> {
        let c = self.read_client().await?;
        let status = filter.status.map(|s| s.as_str());
        let limit = filter.limit.unwrap_or(i64::MAX).clamp(0, i64::MAX);
        let (after_at, after_id) = (filter.after.map(|k| k.created_at), filter.after.map(|k| k.id));
        let ids: Vec<Uuid> = c
            .query(
                "SELECT l.id FROM leases l
                 WHERE ($1::text IS NULL OR l.project_id = $1)
                   AND ($2::text IS NULL OR l.status = $2)
                   AND ($3::timestamptz IS NULL OR (l.created_at, l.id) > ($3, $4::uuid))
                 ORDER BY l.created_at, l.id LIMIT $5",
                &[&filter.project_id, &status, &after_at, &after_id, &limit],
            )
            .await
            .map_err(db)?
            .iter()
            .map(|r| r.get("id"))
            .collect();
        Ok(load_leases(&c, &ids).await?)
    }
}

/// A lease as its row reads (columns `id`, `name`, `project_id`,
/// `user_id`, `start_at`, `end_at`, `status`, `degraded`,
/// `recurrence_id`, `time_zone`), without its reservations and lease events.
pub(crate) fn lease_of(r: &Row) -> LeaseRecord {
    let status: String = r.get("status");
    LeaseRecord {
        id: r.get("id"),
        name: r.get("name"),
        project_id: r.get("project_id"),
        user_id: r.get("user_id"),
        start: r.get("start_at"),
        end: r.get("end_at"),
        status: LeaseStatus::parse(&status).unwrap_or(LeaseStatus::Error),
        degraded: r.get("degraded"),
        recurrence_id: r.get("recurrence_id"),
        time_zone: r.get("time_zone"),
        reservations: Vec::new(),
        events: Vec::new(),
    }
}
