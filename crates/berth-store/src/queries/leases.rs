//! Reads of leases and hosts.

use std::collections::{BTreeMap, HashMap};

use berth_core::error::ErrorCode;
use berth_core::lease::{
    LeaseEventRecord, LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus, ReservationRecord, ReservationStatus,
    Slot,
};
use berth_core::Error;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

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
    /// Leases created after this one.
    pub marker: Option<Uuid>,
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    pub id: Uuid,
    pub name: String,
    pub vcpus: i64,
    pub memory_mb: i64,
    pub local_gb: i64,
    pub reservable: bool,
    /// Unusable: disabled by an admin or a plugin's report (why), or its
    /// provider has Nova's `COMPUTE_STATUS_DISABLED` trait.
    pub disabled: Option<String>,
    pub capabilities: BTreeMap<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The reservations holding a host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostAllocation {
    pub host: Uuid,
    pub reservations: Vec<(Uuid, Uuid)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostProperty {
    pub name: String,
    pub private: bool,
    pub values: Vec<Value>,
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
    let [rows, slot_rows, reservation_rows, event_rows] = crate::sql::pipeline(
        c,
        [
            (
                "SELECT id, name, project_id, user_id, start_at, end_at, status, degraded, recurrence_id, created_at,
                        updated_at
                 FROM leases WHERE id = ANY($1)",
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
                created_at: r.get(9),
                updated_at: r.get(10),
                reservation_updated_at: Vec::new(),
                event_details: Vec::new(),
            },
        );
    }
    add_reservations(&reservation_rows, slots_of(&slot_rows), &mut leases);
    add_events(&event_rows, &mut leases);
    Ok(ids.iter().filter_map(|id| leases.remove(id)).collect())
}

/// The slots of the leases' reservations, by reservation.
fn slots_of(rows: &[Row]) -> HashMap<Uuid, Vec<Slot>> {
    let mut slots: HashMap<Uuid, Vec<Slot>> = HashMap::new();
    for r in rows {
        let resources: Value = r.get(3);
        slots.entry(r.get(0)).or_default().push(Slot {
            consumer: r.get(1),
            provider: r.get(2),
            resources: serde_json::from_value(resources).unwrap_or_default(),
        });
    }
    slots
}

/// Adds their reservations, in order, with `slots`, to `leases`.
fn add_reservations(rows: &[Row], mut slots: HashMap<Uuid, Vec<Slot>>, leases: &mut HashMap<Uuid, Lease>) {
    for r in rows {
        let lease: Uuid = r.get(0);
        let id: Uuid = r.get(1);
        let status: String = r.get(4);
        if let Some(l) = leases.get_mut(&lease) {
            l.record.reservations.push(ReservationRecord {
                id,
                resource_type: r.get(2),
                resource_id: r.get(3),
                status: ReservationStatus::parse(&status).unwrap_or(ReservationStatus::Error),
                params: r.get(5),
                slots: slots.remove(&id).unwrap_or_default(),
                created_at: r.get(6),
                missing_resources: r.get(8),
                resources_changed: r.get(9),
            });
            l.reservation_updated_at.push(r.get(7));
        }
    }
}

/// Adds their lease events, in firing order, to `leases`.
fn add_events(rows: &[Row], leases: &mut HashMap<Uuid, Lease>) {
    for r in rows {
        let lease: Uuid = r.get(0);
        let event_type: String = r.get(2);
        let status: String = r.get(4);
        if let Some(l) = leases.get_mut(&lease) {
            l.record.events.push(LeaseEventRecord {
                id: r.get(1),
                event_type: LeaseEventType::parse(&event_type).unwrap_or(LeaseEventType::EndLease),
                time: r.get(3),
                status: LeaseEventStatus::parse(&status).unwrap_or(LeaseEventStatus::Error),
            });
            l.event_details.push(LeaseEventDetail {
                attempts: r.get(5),
                last_error: r.get(6),
                claimed_by: r.get(7),
                claim_expires_at: r.get(8),
                created_at: r.get(9),
                updated_at: r.get(10),
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
    }
}

/// Not found unless the lease exists and `project` (None: admin) may see it.
pub(crate) fn visible(lease: Option<Lease>, id: Uuid, project: Option<&str>) -> Result<Lease, Error> {
    match lease {
        Some(l) if project.is_none_or(|p| p == l.record.project_id) => Ok(l),
        _ => Err(Error::not_found(ErrorCode::LeaseNotFound, format!("lease {id} could not be found"))),
    }
}

const HOST_SELECT: &str = "SELECT p.uuid, p.name,
        coalesce((SELECT total FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = 'VCPU'), 0),
        coalesce((SELECT total FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = 'MEMORY_MB'), 0),
        coalesce((SELECT total FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = 'DISK_GB'), 0),
        h.reservable, h.capabilities, h.created_at, h.updated_at,
        CASE WHEN h.disabled THEN coalesce(h.disabled_reason, 'admin')
             WHEN EXISTS (SELECT 1 FROM provider_traits t
                          WHERE t.provider_uuid = p.uuid AND t.trait = 'COMPUTE_STATUS_DISABLED')
             THEN 'COMPUTE_STATUS_DISABLED' END
    FROM hosts h JOIN providers p ON p.uuid = h.provider_uuid";

fn host(r: &tokio_postgres::Row) -> Host {
    let caps: Value = r.get(6);
    Host {
        id: r.get(0),
        name: r.get(1),
        vcpus: r.get(2),
        memory_mb: r.get(3),
        local_gb: r.get(4),
        reservable: r.get(5),
        disabled: r.get(9),
        capabilities: serde_json::from_value(caps).unwrap_or_default(),
        created_at: r.get(7),
        updated_at: r.get(8),
    }
}

impl Store {
    /// One lease, if `project` (None: admin) may see it.
    pub async fn lease(&self, id: Uuid, project: Option<&str>) -> Result<Lease, Error> {
        let c = self.client().await?;
        let mut found = load_leases(&c, &[id]).await?;
        visible(found.pop(), id, project)
    }

    /// Leases in creation order, filtered.
    pub async fn leases(&self, filter: &LeaseFilter) -> Result<Vec<Lease>, Error> {
        let c = self.read_client().await?;
        let status = filter.status.map(|s| s.as_str());
        let limit = filter.limit.unwrap_or(i64::MAX).clamp(0, i64::MAX);
        if let Some(m) = filter.marker {
            let seen = c
                .query_opt(
                    "SELECT 1 FROM leases WHERE id = $1 AND ($2::text IS NULL OR project_id = $2)",
                    &[&m, &filter.project_id],
                )
                .await
                .map_err(db)?;
            if seen.is_none() {
                return Err(Error::invalid(ErrorCode::InvalidLease, format!("marker {m} is not a lease you can see")));
            }
        }
        let ids: Vec<Uuid> = c
            .query(
                "SELECT l.id FROM leases l
                 WHERE ($1::text IS NULL OR l.project_id = $1)
                   AND ($2::text IS NULL OR l.status = $2)
                   AND ($3::uuid IS NULL OR (l.created_at, l.id) > (SELECT created_at, id FROM leases WHERE id = $3))
                 ORDER BY l.created_at, l.id LIMIT $4",
                &[&filter.project_id, &status, &filter.marker, &limit],
            )
            .await
            .map_err(db)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        Ok(load_leases(&c, &ids).await?)
    }

    /// At most `limit` hosts by name, after the host `marker` if given (a
    /// marker that names no host is refused).
    pub async fn hosts(&self, marker: Option<Uuid>, limit: i64) -> Result<Vec<Host>, Error> {
        let c = self.read_client().await?;
        if let Some(m) = marker {
            let known = c.query_opt("SELECT 1 FROM hosts WHERE provider_uuid = $1", &[&m]).await.map_err(db)?;
            if known.is_none() {
                return Err(Error::invalid(ErrorCode::HostInvalid, format!("marker {m} is not a host")));
            }
        }
        let rows = c
            .query(
                &format!(
                    "{HOST_SELECT}
                     WHERE $1::uuid IS NULL
                        OR (p.name, p.uuid) > (SELECT name, uuid FROM providers WHERE uuid = $1)
                     ORDER BY p.name, p.uuid LIMIT $2"
                ),
                &[&marker, &limit],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(host).collect())
    }

    pub async fn host(&self, id: Uuid) -> Result<Host, Error> {
        let c = self.client().await?;
        let row = c.query_opt(&format!("{HOST_SELECT} WHERE p.uuid = $1"), &[&id]).await.map_err(db)?;
        row.map(|r| host(&r))
            .ok_or_else(|| Error::not_found(ErrorCode::HostNotFound, format!("host {id} could not be found")))
    }

    /// Every host (or one) with the reservations holding it, optionally
    /// only those of one lease, one reservation, or one project's leases.
    pub async fn host_allocations(
        &self,
        host: Option<Uuid>,
        lease: Option<Uuid>,
        reservation: Option<Uuid>,
        project: Option<&str>,
    ) -> Result<Vec<HostAllocation>, Error> {
        let c = self.client().await?;
        let hosts: Vec<Uuid> = c
            .query(
                "SELECT h.provider_uuid FROM hosts h JOIN providers p ON p.uuid = h.provider_uuid
                 WHERE $1::uuid IS NULL OR h.provider_uuid = $1 ORDER BY p.name",
                &[&host],
            )
            .await
            .map_err(db)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if let Some(h) = host {
            if hosts.is_empty() {
                return Err(Error::not_found(ErrorCode::HostNotFound, format!("host {h} could not be found")));
            }
        }
        let rows = c
            .query(
                "SELECT DISTINCT s.provider_uuid, r.id, r.lease_id FROM reservation_slots s
                 JOIN reservations r ON r.id = s.reservation_id
                 JOIN leases l ON l.id = r.lease_id
                 WHERE s.provider_uuid = ANY($1)
                   AND ($2::uuid IS NULL OR r.lease_id = $2) AND ($3::uuid IS NULL OR r.id = $3)
                   AND ($4::text IS NULL OR l.project_id = $4)
                 ORDER BY 1, 3, 2",
                &[&hosts, &lease, &reservation, &project],
            )
            .await
            .map_err(db)?;
        let mut by_host: HashMap<Uuid, Vec<(Uuid, Uuid)>> = HashMap::new();
        for r in rows {
            by_host.entry(r.get(0)).or_default().push((r.get(1), r.get(2)));
        }
        Ok(hosts
            .into_iter()
            .map(|h| HostAllocation { host: h, reservations: by_host.remove(&h).unwrap_or_default() })
            .collect())
    }

    /// Host properties with the values hosts have; private ones only when
    /// `include_private`.
    pub async fn host_properties(&self, include_private: bool) -> Result<Vec<HostProperty>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT hp.name, hp.private,
                        coalesce((SELECT jsonb_agg(DISTINCT h.capabilities -> hp.name) FROM hosts h
                                  WHERE h.capabilities ? hp.name), '[]'::jsonb)
                 FROM host_properties hp WHERE $1 OR NOT hp.private ORDER BY hp.name",
                &[&include_private],
            )
            .await
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| {
                let values: Value = r.get(2);
                HostProperty {
                    name: r.get(0),
                    private: r.get(1),
                    values: values.as_array().cloned().unwrap_or_default(),
                }
            })
            .collect())
    }
}

/// A lease as its row reads (id, name, project_id, user_id, start, end,
/// status, degraded, recurrence_id: the first nine columns), without its
/// reservations and lease events.
pub(crate) fn lease_of(r: &Row) -> LeaseRecord {
    let status: String = r.get(6);
    LeaseRecord {
        id: r.get(0),
        name: r.get(1),
        project_id: r.get(2),
        user_id: r.get(3),
        start: r.get(4),
        end: r.get(5),
        status: LeaseStatus::parse(&status).unwrap_or(LeaseStatus::Error),
        degraded: r.get(7),
        recurrence_id: r.get(8),
        reservations: Vec::new(),
        events: Vec::new(),
    }
}
