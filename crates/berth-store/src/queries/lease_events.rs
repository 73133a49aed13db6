//! Reads for the manager and for operators watching it: lease events with
//! their attempts and claims, when the next one is due, and what a hook
//! needs to know about its lease.

use std::collections::HashMap;

use berth_core::error::ErrorCode;
use berth_core::lease::{LeaseEventStatus, LeaseEventType, LeaseRecord, ReservationRecord, ReservationStatus, Slot};
use berth_core::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::{Store, StoreError};

/// A lease event as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseEventRow {
    pub id: Uuid,
    pub lease_id: Uuid,
    pub lease_name: String,
    pub project_id: String,
    pub event_type: String,
    pub time: DateTime<Utc>,
    pub status: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub claimed_by: Option<String>,
    pub claim_expires_at: Option<DateTime<Utc>>,
    pub retry_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Which lease events a list returns, in due-time order.
#[derive(Debug, Clone, Default)]
pub struct LeaseEventFilter {
    /// Only this project's (None: every project; for admins).
    pub project_id: Option<String>,
    pub lease_id: Option<Uuid>,
    pub status: Option<LeaseEventStatus>,
    pub event_type: Option<LeaseEventType>,
    /// Events after this one (in due-time order).
    pub marker: Option<Uuid>,
    pub limit: Option<i64>,
}

/// Another consumer on a host a reservation holds (an instance someone
/// started on it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OtherConsumer {
    pub provider: Uuid,
    pub consumer: Uuid,
    pub project_id: String,
    pub resources: serde_json::Value,
}

/// What a hook call needs: the lease, the names of the providers its slots
/// are on, who else holds those providers now, and whom it is shared with.
#[derive(Debug, Clone)]
pub struct HookContext {
    /// The lease with its reservations and their slots; without its lease
    /// events (`events` is empty): hooks are not told of them.
    pub lease: LeaseRecord,
    pub provider_names: HashMap<Uuid, String>,
    pub others: Vec<OtherConsumer>,
    pub shared_with: Vec<String>,
}

/// When the manager must next look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NextDue {
    /// The database's time when it answered.
    pub now: DateTime<Utc>,
    /// The earliest due time (or claim expiry) after `now`, if any.
    pub due: Option<DateTime<Utc>>,
}

impl NextDue {
    /// How long after `now` the next one is due.
    pub fn wait(&self) -> Option<std::time::Duration> {
        self.due.map(|d| (d - self.now).to_std().unwrap_or_default())
    }
}

/// The earliest due time (or claim expiry) after the statement's time: the
/// claim statement answers it too, from the snapshot it claimed from.
pub(crate) const NEXT_DUE: &str = "least(
    (SELECT min(coalesce(retry_at, time)) FROM lease_events
     WHERE status = 'UNDONE' AND coalesce(retry_at, time) > statement_timestamp()),
    (SELECT min(claim_expires_at) FROM lease_events
     WHERE status = 'IN_PROGRESS' AND claim_expires_at > statement_timestamp()))";

/// Whether an event is due and unclaimed (each half one look into the
/// claim's partial indexes).
const WAITING: &str = "SELECT (EXISTS (SELECT 1 FROM lease_events
                   WHERE status = 'UNDONE' AND coalesce(retry_at, time) <= statement_timestamp())
        OR EXISTS (SELECT 1 FROM lease_events
                   WHERE status = 'IN_PROGRESS' AND claim_expires_at <= statement_timestamp())) AS waiting";

/// Whole-host reservations: the type whose hooks act on the other consumers.
const HOSTS: &str = "physical:host";

fn db(e: tokio_postgres::Error) -> Error {
    StoreError::from(e).into()
}

const COLUMNS: &str = "e.id, e.lease_id, l.name AS lease_name, l.project_id, e.event_type, e.time, e.status,
    e.attempts, e.last_error, e.claimed_by, e.claim_expires_at, e.retry_at, e.created_at, e.updated_at";

fn row(r: &tokio_postgres::Row) -> LeaseEventRow {
    LeaseEventRow {
        id: r.get("id"),
        lease_id: r.get("lease_id"),
        lease_name: r.get("lease_name"),
        project_id: r.get("project_id"),
        event_type: r.get("event_type"),
        time: r.get("time"),
        status: r.get("status"),
        attempts: r.get("attempts"),
        last_error: r.get("last_error"),
        claimed_by: r.get("claimed_by"),
        claim_expires_at: r.get("claim_expires_at"),
        retry_at: r.get("retry_at"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

/// One lease event as `client` sees it (inside a command: as the command
/// left it); None when gone or not `project`'s.
pub(crate) async fn lease_event_on(
    client: &impl tokio_postgres::GenericClient,
    id: Uuid,
    project: Option<&str>,
) -> Result<Option<LeaseEventRow>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM lease_events e JOIN leases l ON l.id = e.lease_id
         WHERE e.id = $1 AND ($2::text IS NULL OR l.project_id = $2)"
    );
    Ok(client.query_opt(&sql, &[&id, &project]).await?.as_ref().map(row))
}

/// Lease events due now, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueNow {
    /// Due by the database's clock and not yet claimed.
    pub due: i64,
    /// Whether an operator has paused the managers.
    pub paused: bool,
}

impl Store {
    /// One lease event: not found unless `project` (None: every project)
    /// owns its lease.
    pub async fn lease_event(&self, id: Uuid, project: Option<&str>) -> Result<LeaseEventRow, Error> {
        let c = self.client().await?;
        lease_event_on(&**c, id, project).await.map_err(db)?.ok_or_else(|| {
            Error::not_found(
                berth_core::error::ErrorCode::LeaseEventNotFound,
                format!("lease event {id} could not be found"),
            )
        })
    }

    /// Lease events in due-time order, filtered.
    pub async fn lease_events(&self, filter: &LeaseEventFilter) -> Result<Vec<LeaseEventRow>, Error> {
        let c = self.client().await?;
        if let Some(m) = filter.marker {
            let seen = c
                .query_opt(
                    "SELECT 1 FROM lease_events e JOIN leases l ON l.id = e.lease_id
                     WHERE e.id = $1 AND ($2::text IS NULL OR l.project_id = $2)",
                    &[&m, &filter.project_id],
                )
                .await
                .map_err(db)?;
            if seen.is_none() {
                return Err(Error::invalid(
                    ErrorCode::InvalidLease,
                    format!("marker {m} is not a lease event you can see"),
                ));
            }
        }
        let limit = filter.limit.unwrap_or(1000).clamp(0, 10_000);
        let rows = c
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM lease_events e JOIN leases l ON l.id = e.lease_id
                     WHERE ($1::text IS NULL OR l.project_id = $1)
                       AND ($2::uuid IS NULL OR e.lease_id = $2)
                       AND ($3::text IS NULL OR e.status = $3)
                       AND ($4::text IS NULL OR e.event_type = $4)
                       AND ($5::uuid IS NULL OR (e.time, e.id) > (SELECT time, id FROM lease_events WHERE id = $5))
                     ORDER BY e.time, e.id LIMIT $6"
                ),
                &[
                    &filter.project_id,
                    &filter.lease_id,
                    &filter.status.map(|s| s.as_str()),
                    &filter.event_type.map(|t| t.as_str()),
                    &filter.marker,
                    &limit,
                ],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(row).collect())
    }

    /// When the manager must next look, on the database's clock: the
    /// earliest due time (or claim expiry) still ahead. Events already due
    /// but waiting for another to finish are not counted: finishing that one
    /// wakes the manager.
    pub async fn next_lease_event_due(&self) -> Result<NextDue, Error> {
        let c = self.client().await?;
        let sql = format!("SELECT statement_timestamp() AS now, {NEXT_DUE} AS next");
        let r = crate::sql::query(&c, &sql, &[]).await.map_err(db)?;
        let r = r.first().ok_or_else(|| Error::internal("the next due time: no row"))?;
        Ok(NextDue { now: r.get("now"), due: r.get("next") })
    }

    /// Whether a lease event is due by the database's clock and not
    /// claimed (waiting, or its claim expired), whatever holds it back.
    pub async fn lease_events_waiting(&self) -> Result<bool, Error> {
        let c = self.client().await?;
        let r = crate::sql::query(&c, WAITING, &[]).await.map_err(db)?;
        Ok(r.first().is_some_and(|r| r.get("waiting")))
    }

    /// How many lease events are due by the database's clock and not yet
    /// claimed, and whether an operator has paused the managers (for
    /// metrics).
    pub async fn lease_events_due(&self) -> Result<DueNow, Error> {
        let c = self.client().await?;
        let r = crate::sql::query(
            &c,
            "SELECT (SELECT count(*) FROM lease_events
                     WHERE status = 'UNDONE' AND coalesce(retry_at, time) <= statement_timestamp()) AS due,
                    (SELECT paused FROM manager_state) AS paused",
            &[],
        )
        .await
        .map_err(db)?;
        let r = r.first().ok_or_else(|| Error::internal("due lease events: no row"))?;
        Ok(DueNow { due: r.get("due"), paused: r.get("paused") })
    }
}

/// The leases `ids` as hooks see them, with their reservations and slots
/// but not their lease events, in one round trip: two statements, not the
/// four of a whole lease (the manager reads a batch of them per claim).
pub(super) async fn hook_leases(
    c: &impl crate::client::GenericClient,
    ids: &[Uuid],
) -> Result<Vec<LeaseRecord>, Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let leases = format!(
        "SELECT {HOOK_LEASE_COLUMNS} FROM leases l LEFT JOIN reservations r ON r.lease_id = l.id
         WHERE l.id = ANY($1) ORDER BY l.id, r.position"
    );
    let [rows, slot_rows] = crate::sql::pipeline(
        c,
        [
            (&leases, &[&ids]),
            (
                "SELECT s.reservation_id, s.consumer_uuid, s.provider_uuid, s.resources
                 FROM reservation_slots s JOIN reservations r ON r.id = s.reservation_id
                 WHERE r.lease_id = ANY($1) ORDER BY s.reservation_id, s.provider_uuid, s.consumer_uuid",
                &[&ids],
            ),
        ],
    )
    .await
    .map_err(db)?;
    let mut slots = super::leases::slots_by_reservation(&slot_rows);
    let mut out: Vec<LeaseRecord> = Vec::with_capacity(ids.len());
    for r in &rows {
        let id: Uuid = r.get("id");
        if out.last().is_none_or(|l| l.id != id) {
            out.push(super::leases::lease_of(r));
        }
        let Some(reservation) = r.get::<_, Option<Uuid>>("reservation_id") else { continue };
        let lease = out.last_mut().expect("pushed above");
        lease.reservations.push(reservation_of(r, slots.remove(&reservation).unwrap_or_default()));
    }
    Ok(out)
}

/// The columns of a lease and one of its reservations (none: NULLs) as
/// hooks see them, for [`super::leases::lease_of`] and [`reservation_of`]:
/// a lease `l` joined with its reservations `r`.
/// The reservation's columns are named apart from the lease's (`id`,
/// `status`).
pub(crate) const HOOK_LEASE_COLUMNS: &str = "l.id, l.name, l.project_id, l.user_id, l.start_at, l.end_at,
    l.status, l.degraded, l.recurrence_id, l.time_zone, r.id AS reservation_id, r.resource_type, r.resource_id,
    r.status AS reservation_status, r.params, r.created_at AS reservation_created_at, r.missing_resources,
    r.resources_changed";

/// The reservation in a row of [`HOOK_LEASE_COLUMNS`] (its id not NULL).
pub(crate) fn reservation_of(r: &tokio_postgres::Row, slots: Vec<Slot>) -> ReservationRecord {
    let status: String = r.get("reservation_status");
    ReservationRecord {
        id: r.get("reservation_id"),
        resource_type: r.get("resource_type"),
        resource_id: r.get("resource_id"),
        status: ReservationStatus::parse(&status).unwrap_or(ReservationStatus::Error),
        params: r.get("params"),
        slots,
        created_at: r.get("reservation_created_at"),
        missing_resources: r.get("missing_resources"),
        resources_changed: r.get("resources_changed"),
    }
}

/// A reservation's slots as one value, `slots` (after
/// [`HOOK_LEASE_COLUMNS`], in a statement that reads leases for hooks in
/// one go), in the order [`hook_leases`] reads them.
pub(crate) const SLOTS_JSON: &str = "(SELECT jsonb_agg(jsonb_build_array(s.consumer_uuid, s.provider_uuid, s.resources)
                                  ORDER BY s.provider_uuid, s.consumer_uuid)
     FROM reservation_slots s WHERE s.reservation_id = r.id) AS slots";

/// The slots of [`SLOTS_JSON`].
pub(crate) fn slots_of(v: Option<serde_json::Value>) -> Vec<Slot> {
    let Some(serde_json::Value::Array(all)) = v else { return Vec::new() };
    all.into_iter()
        .filter_map(|s| {
            let serde_json::Value::Array(mut s) = s else { return None };
            let resources = s.pop().and_then(|r| serde_json::from_value(r).ok()).unwrap_or_default();
            let provider = s.pop().and_then(|p| serde_json::from_value(p).ok())?;
            let consumer = s.pop().and_then(|c| serde_json::from_value(c).ok())?;
            Some(Slot { consumer, provider, resources })
        })
        .collect()
}

/// Another consumer on a whole host: (provider, consumer, project,
/// resources, held now, slots drawn from).
pub(super) type OtherRow = (Uuid, Uuid, String, serde_json::Value, bool, Vec<Uuid>);

/// The names of the providers the leases' slots are on, and the consumers
/// other than slots on their whole hosts: those holding one at `at`, and
/// those drawing from one of the slots.
pub(super) async fn names_and_others(
    c: &impl crate::client::GenericClient,
    loaded: &[LeaseRecord],
) -> Result<(HashMap<Uuid, String>, Vec<OtherRow>), Error> {
    let mut providers: Vec<Uuid> = Vec::new();
    let mut host_slots: Vec<Uuid> = Vec::new();
    let mut host_providers: Vec<Uuid> = Vec::new();
    for l in loaded {
        for r in &l.reservations {
            for s in &r.slots {
                providers.push(s.provider);
                if r.resource_type == HOSTS {
                    host_providers.push(s.provider);
                    host_slots.push(s.consumer);
                }
            }
        }
    }
    providers.sort();
    providers.dedup();
    host_providers.sort();
    host_providers.dedup();
    if providers.is_empty() {
        return Ok((HashMap::new(), Vec::new()));
    }
    let [names, others] = crate::sql::pipeline(
        c,
        [
            ("SELECT uuid, name FROM providers WHERE uuid = ANY($1)", &[&providers]),
            (
                "SELECT a.provider_uuid, a.consumer_uuid, c.project_id,
                        jsonb_object_agg(a.resource_class, a.used) AS resources,
                        bool_or(a.during @> statement_timestamp()) AS held_now,
                        coalesce((SELECT array_agg(d.slot_consumer) FROM reservation_draws d
                                  WHERE d.consumer_uuid = a.consumer_uuid AND d.slot_consumer = ANY($2)), '{}')
                          AS drawn_from
                 FROM allocations a JOIN consumers c ON c.uuid = a.consumer_uuid
                 WHERE a.provider_uuid = ANY($1) AND c.consumer_type IS DISTINCT FROM 'RESERVATION'
                   AND (a.during @> statement_timestamp()
                        OR a.consumer_uuid IN (SELECT consumer_uuid FROM reservation_draws
                                               WHERE slot_consumer = ANY($2)))
                 GROUP BY 1, 2, 3 ORDER BY 1, 2",
                &[&host_providers, &host_slots],
            ),
        ],
    )
    .await
    .map_err(db)?;
    let names = names.iter().map(|r| (r.get("uuid"), r.get("name"))).collect();
    let others = others
        .iter()
        .map(|r| {
            let (provider, consumer, project) = (r.get("provider_uuid"), r.get("consumer_uuid"), r.get("project_id"));
            (provider, consumer, project, r.get("resources"), r.get("held_now"), r.get("drawn_from"))
        })
        .collect();
    Ok((names, others))
}

/// A lease's hook context: its providers' names, and the consumers other
/// than slots on its whole hosts that hold one now or draw from its slots.
pub(super) fn hook_context(lease: LeaseRecord, names: &HashMap<Uuid, String>, others: &[OtherRow]) -> HookContext {
    let mut mine: Vec<Uuid> = Vec::new();
    let mut own: Vec<Uuid> = Vec::new();
    for r in lease.reservations.iter().filter(|r| r.resource_type == HOSTS) {
        for s in &r.slots {
            mine.push(s.provider);
            own.push(s.consumer);
        }
    }
    let provider_names = lease
        .reservations
        .iter()
        .flat_map(|r| r.slots.iter())
        .filter_map(|s| names.get(&s.provider).map(|n| (s.provider, n.clone())))
        .collect();
    let others = others
        .iter()
        .filter(|o| mine.contains(&o.0) && (o.4 || o.5.iter().any(|s| own.contains(s))))
        .map(|o| OtherConsumer { provider: o.0, consumer: o.1, project_id: o.2.clone(), resources: o.3.clone() })
        .collect();
    HookContext { lease, provider_names, others, shared_with: Vec::new() }
}

/// A host held back at a lease's end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostHold {
    pub pool: Uuid,
    pub until: Option<DateTime<Utc>>,
    pub lease_id: Uuid,
}

impl Store {
    /// The pools (Placement aggregates) a host is in.
    #[cfg(feature = "testing")]
    pub async fn host_pools(&self, provider: Uuid) -> Result<Vec<Uuid>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT aggregate FROM provider_aggregates WHERE provider_uuid = $1 ORDER BY aggregate",
                &[&provider],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| r.get("aggregate")).collect())
    }

    /// Whether (and how) a host is held back at a lease's end.
    #[cfg(feature = "testing")]
    pub async fn host_hold(&self, provider: Uuid) -> Result<Option<HostHold>, Error> {
        let c = self.client().await?;
        let row = c
            .query_opt("SELECT pool, until, lease_id FROM host_holds WHERE provider_uuid = $1", &[&provider])
            .await
            .map_err(db)?;
        Ok(row.map(|r| HostHold { pool: r.get("pool"), until: r.get("until"), lease_id: r.get("lease_id") }))
    }
}

impl Store {
    /// How many lease events there are in each status.
    #[cfg(feature = "testing")]
    pub async fn lease_event_counts(&self) -> Result<HashMap<String, i64>, Error> {
        let c = self.client().await?;
        let rows = c.query("SELECT status, count(*) AS n FROM lease_events GROUP BY status", &[]).await.map_err(db)?;
        Ok(rows.iter().map(|r| (r.get("status"), r.get("n"))).collect())
    }
}
