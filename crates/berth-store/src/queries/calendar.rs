//! The reservation calendar: which providers hold which leases' slots over
//! a window, for the console's picture. Who may see whose names is the
//! caller's to decide; this read returns every project's.

use berth_core::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::{Store, StoreError};

/// A row of the calendar: a host, or another provider a lease holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalendarRow {
    pub provider: Uuid,
    pub name: String,
    /// Whether it is a Blazar host (else a provider a slot landed on).
    pub host: bool,
    pub reservable: bool,
}

/// A bar: one reservation's slots on one provider over its lease's window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalendarBar {
    pub provider: Uuid,
    pub lease_id: Uuid,
    pub lease_name: String,
    pub project_id: String,
    pub lease_status: String,
    pub reservation_id: Uuid,
    pub resource_type: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Slots of the reservation on this provider (instances; 1 for a host).
    pub slots: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Calendar {
    pub rows: Vec<CalendarRow>,
    pub bars: Vec<CalendarBar>,
}

impl Store {
    /// Every host, and every provider a slot holds over `[start, end)`, by
    /// name; and the bars of the leases whose window overlaps it, by
    /// provider then start.
    pub async fn calendar(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> Result<Calendar, Error> {
        let c = self.read_client().await.map_err(Error::from)?;
        let db = |e: tokio_postgres::Error| Error::from(StoreError::from(e));
        let bars: Vec<CalendarBar> = c
            .query(
                "SELECT s.provider_uuid, l.id AS lease_id, l.name AS lease_name, l.project_id,
                        l.status AS lease_status, r.id AS reservation_id, r.resource_type, l.start_at, l.end_at,
                        count(*) AS slots
                 FROM leases l
                 JOIN reservations r ON r.lease_id = l.id
                 JOIN reservation_slots s ON s.reservation_id = r.id
                 WHERE l.start_at < $2 AND l.end_at > $1
                 GROUP BY s.provider_uuid, l.id, r.id
                 ORDER BY s.provider_uuid, l.start_at, l.id, r.id",
                &[&start, &end],
            )
            .await
            .map_err(db)?
            .iter()
            .map(|r| CalendarBar {
                provider: r.get("provider_uuid"),
                lease_id: r.get("lease_id"),
                lease_name: r.get("lease_name"),
                project_id: r.get("project_id"),
                lease_status: r.get("lease_status"),
                reservation_id: r.get("reservation_id"),
                resource_type: r.get("resource_type"),
                start: r.get("start_at"),
                end: r.get("end_at"),
                slots: r.get("slots"),
            })
            .collect();
        let held: Vec<Uuid> = bars.iter().map(|b| b.provider).collect();
        let rows = c
            .query(
                "SELECT p.uuid, p.name, h.provider_uuid IS NOT NULL AS host,
                        coalesce(h.reservable, false) AS reservable
                 FROM providers p LEFT JOIN hosts h ON h.provider_uuid = p.uuid
                 WHERE h.provider_uuid IS NOT NULL OR p.uuid = ANY($1)
                 ORDER BY p.name, p.uuid",
                &[&held],
            )
            .await
            .map_err(db)?
            .iter()
            .map(|r| CalendarRow {
                provider: r.get("uuid"),
                name: r.get("name"),
                host: r.get("host"),
                reservable: r.get("reservable"),
            })
            .collect();
        Ok(Calendar { rows, bars })
    }
}
