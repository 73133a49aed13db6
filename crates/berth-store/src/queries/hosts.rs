//! Reads of hosts, their allocations and their extra capabilities' names.
//!
//! Lists go by name, which is unique (`providers.name`, `host_properties`'
//! key), and each page is a keyset read on its index: the names after the
//! last one shown, so a page costs the same however many come before it,
//! and a host deleted between two pages ends neither the list nor the
//! paging.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::error::ErrorCode;
use berth_core::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{Store, StoreError};

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

/// The reservations holding a host: (reservation, lease) pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostAllocation {
    pub host: Uuid,
    /// The host's name: its place in lists.
    pub name: String,
    pub reservations: Vec<(Uuid, Uuid)>,
}

/// Which reservations an allocation list shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocationFilter<'a> {
    pub lease: Option<Uuid>,
    pub reservation: Option<Uuid>,
    /// Only this project's leases (None: every project's).
    pub project: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostProperty {
    pub name: String,
    pub private: bool,
    /// The values hosts have, when asked for.
    pub values: Vec<Value>,
}

fn db(e: tokio_postgres::Error) -> Error {
    StoreError::from(e).into()
}

const HOST_SELECT: &str = "SELECT p.uuid, p.name,
        coalesce((SELECT total FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = 'VCPU'), 0)
          AS vcpus,
        coalesce((SELECT total FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = 'MEMORY_MB'), 0)
          AS memory_mb,
        coalesce((SELECT total FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = 'DISK_GB'), 0)
          AS local_gb,
        h.reservable, h.capabilities, h.created_at, h.updated_at,
        CASE WHEN h.disabled THEN coalesce(h.disabled_reason, 'admin')
             WHEN EXISTS (SELECT 1 FROM provider_traits t
                          WHERE t.provider_uuid = p.uuid AND t.trait = 'COMPUTE_STATUS_DISABLED')
             THEN 'COMPUTE_STATUS_DISABLED' END AS disabled
    FROM hosts h JOIN providers p ON p.uuid = h.provider_uuid";

fn host(r: &Row) -> Host {
    let caps: Value = r.get("capabilities");
    Host {
        id: r.get("uuid"),
        name: r.get("name"),
        vcpus: r.get("vcpus"),
        memory_mb: r.get("memory_mb"),
        local_gb: r.get("local_gb"),
        reservable: r.get("reservable"),
        disabled: r.get("disabled"),
        capabilities: serde_json::from_value(caps).unwrap_or_default(),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

/// A host's name by its id.
const HOST_NAME: &str = "SELECT p.name FROM hosts h JOIN providers p ON p.uuid = h.provider_uuid WHERE p.uuid = $1";

impl Store {
    /// The name of host `id`, a list's place for a marker naming it.
    pub async fn host_name(&self, id: Uuid) -> Result<Option<String>, Error> {
        let c = self.read_client().await?;
        let row = c.query_opt(HOST_NAME, &[&id]).await.map_err(db)?;
        Ok(row.map(|r| r.get("name")))
    }

    /// At most `limit` hosts by name, after the name `after` if given.
    pub async fn hosts(&self, after: Option<&str>, limit: i64) -> Result<Vec<Host>, Error> {
        let c = self.read_client().await?;
        let rows = match after {
            None => c.query(&format!("{HOST_SELECT} ORDER BY p.name LIMIT $1"), &[&limit]).await,
            Some(name) => {
                c.query(&format!("{HOST_SELECT} WHERE p.name > $1 ORDER BY p.name LIMIT $2"), &[&name, &limit]).await
            }
        };
        Ok(rows.map_err(db)?.iter().map(host).collect())
    }

    pub async fn host(&self, id: Uuid) -> Result<Host, Error> {
        let c = self.client().await?;
        let row = c.query_opt(&format!("{HOST_SELECT} WHERE p.uuid = $1"), &[&id]).await.map_err(db)?;
        row.map(|r| host(&r))
            .ok_or_else(|| Error::not_found(ErrorCode::HostNotFound, format!("host {id} could not be found")))
    }

    /// At most `limit` hosts by name after `after`, each with the
    /// reservations holding it that `filter` shows.
    pub async fn host_allocations(
        &self,
        after: Option<&str>,
        limit: i64,
        filter: AllocationFilter<'_>,
    ) -> Result<Vec<HostAllocation>, Error> {
        let c = self.client().await?;
        const HOSTS: &str = "SELECT h.provider_uuid, p.name FROM hosts h JOIN providers p ON p.uuid = h.provider_uuid";
        let rows = match after {
            None => c.query(&format!("{HOSTS} ORDER BY p.name LIMIT $1"), &[&limit]).await,
            Some(name) => {
                c.query(&format!("{HOSTS} WHERE p.name > $1 ORDER BY p.name LIMIT $2"), &[&name, &limit]).await
            }
        };
        let hosts: Vec<(Uuid, String)> =
            rows.map_err(db)?.iter().map(|r| (r.get("provider_uuid"), r.get("name"))).collect();
        self.holding(&c, hosts, filter).await
    }

    /// Host `id` with the reservations holding it that `filter` shows.
    pub async fn host_allocation(&self, id: Uuid, filter: AllocationFilter<'_>) -> Result<HostAllocation, Error> {
        let c = self.client().await?;
        let row = c.query_opt(HOST_NAME, &[&id]).await.map_err(db)?;
        let Some(name) = row.map(|r| r.get("name")) else {
            return Err(Error::not_found(ErrorCode::HostNotFound, format!("host {id} could not be found")));
        };
        let mut one = self.holding(&c, vec![(id, name)], filter).await?;
        one.pop().ok_or_else(|| Error::internal("a host's allocation went missing"))
    }

    /// `hosts`, in order, each with the reservations holding it.
    async fn holding(
        &self,
        c: &crate::conn::Checkout,
        hosts: Vec<(Uuid, String)>,
        filter: AllocationFilter<'_>,
    ) -> Result<Vec<HostAllocation>, Error> {
        let ids: Vec<Uuid> = hosts.iter().map(|(id, _)| *id).collect();
        let rows = c
            .query(
                "SELECT DISTINCT s.provider_uuid, r.id AS reservation_id, r.lease_id FROM reservation_slots s
                 JOIN reservations r ON r.id = s.reservation_id
                 JOIN leases l ON l.id = r.lease_id
                 WHERE s.provider_uuid = ANY($1)
                   AND ($2::uuid IS NULL OR r.lease_id = $2) AND ($3::uuid IS NULL OR r.id = $3)
                   AND ($4::text IS NULL OR l.project_id = $4)
                 ORDER BY 1, 3, 2",
                &[&ids, &filter.lease, &filter.reservation, &filter.project],
            )
            .await
            .map_err(db)?;
        let mut by_host: HashMap<Uuid, Vec<(Uuid, Uuid)>> = HashMap::new();
        for r in rows {
            by_host.entry(r.get("provider_uuid")).or_default().push((r.get("reservation_id"), r.get("lease_id")));
        }
        Ok(hosts
            .into_iter()
            .map(|(host, name)| HostAllocation { host, reservations: by_host.remove(&host).unwrap_or_default(), name })
            .collect())
    }

    /// Host properties with the values hosts have; private ones only when
    /// `include_private`.
    pub async fn host_properties(&self, include_private: bool) -> Result<Vec<HostProperty>, Error> {
        self.host_properties_after(None, i64::MAX, include_private, true).await
    }

    /// At most `limit` host properties by name after `after`; private ones
    /// only when `include_private`; the values hosts have (a read of every
    /// host having it, each) only `with_values`.
    pub async fn host_properties_after(
        &self,
        after: Option<&str>,
        limit: i64,
        include_private: bool,
        with_values: bool,
    ) -> Result<Vec<HostProperty>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT hp.name, hp.private,
                        CASE WHEN $4 THEN
                            coalesce((SELECT jsonb_agg(DISTINCT h.capabilities -> hp.name) FROM hosts h
                                      WHERE h.capabilities ? hp.name), '[]'::jsonb)
                        ELSE '[]'::jsonb END AS property_values
                 FROM host_properties hp
                 WHERE ($1 OR NOT hp.private) AND ($2::text IS NULL OR hp.name > $2)
                 ORDER BY hp.name LIMIT $3",
                &[&include_private, &after, &limit, &with_values],
            )
            .await
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| {
                let values: Value = r.get("property_values");
                HostProperty {
                    name: r.get("name"),
                    private: r.get("private"),
                    values: values.as_array().cloned().unwrap_or_default(),
                }
            })
            .collect())
    }

    /// Whether host property `name` is one a list may go on from.
    pub async fn host_property_listed(&self, name: &str, include_private: bool) -> Result<bool, Error> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT 1 FROM host_properties WHERE name = $1 AND ($2 OR NOT private)",
                &[&name, &include_private],
            )
            .await
            .map_err(db)?;
        Ok(row.is_some())
    }

    /// The names of the private host properties.
    pub async fn private_host_properties(&self) -> Result<BTreeSet<String>, Error> {
        let c = self.client().await?;
        let rows = c.query("SELECT name FROM host_properties WHERE private", &[]).await.map_err(db)?;
        Ok(rows.iter().map(|r| r.get("name")).collect())
    }
}
