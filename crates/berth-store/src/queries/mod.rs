//! Reads over the projections. Queries never read the log and never write.

use std::collections::BTreeMap;

use berth_core::error::ErrorCode;
use berth_core::{Error, Inventory, Window};
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::Store;

pub mod advice;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
mod advice_tests;
pub mod calendar;
pub mod candidates;
pub(crate) mod ends;
pub(crate) mod fit;
pub(crate) mod free;
mod hook_contexts;
pub mod hosts;
pub mod lease_events;
pub mod leases;
pub mod loans;
pub mod manager;
pub(crate) mod named_hosts;
pub(crate) mod near;
pub mod placement;
pub mod quotas;
pub(crate) mod shares;
pub(crate) mod spans;
pub(crate) mod timelines;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provider {
    pub uuid: Uuid,
    pub name: String,
    pub generation: i64,
    pub parent_uuid: Option<Uuid>,
    pub root_uuid: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationRow {
    pub consumer: Uuid,
    pub provider: Uuid,
    pub resource_class: String,
    pub used: i64,
    pub window: Window,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consumer {
    pub uuid: Uuid,
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: Option<String>,
    pub generation: i64,
}

/// A provider's inventories, by class.
pub(crate) async fn inventories_of(
    c: &impl crate::client::GenericClient,
    uuid: Uuid,
) -> Result<BTreeMap<String, Inventory>, crate::StoreError> {
    let rows = c
        .query(
            "SELECT resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
             FROM inventories WHERE provider_uuid = $1",
            &[&uuid],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get("resource_class"), inventory(r))).collect())
}

/// The inventory in a row's columns named as `inventories`' (`total`,
/// `reserved`, `min_unit`, `max_unit`, `step_size`, `allocation_ratio`).
pub(crate) fn inventory(r: &tokio_postgres::Row) -> Inventory {
    Inventory {
        total: r.get("total"),
        reserved: r.get("reserved"),
        min_unit: r.get("min_unit"),
        max_unit: r.get("max_unit"),
        step_size: r.get("step_size"),
        allocation_ratio: r.get("allocation_ratio"),
    }
}

/// A provider in a row of [`PROVIDER_COLUMNS`].
pub(crate) fn provider(r: &tokio_postgres::Row) -> Provider {
    Provider {
        uuid: r.get("uuid"),
        name: r.get("name"),
        generation: r.get("generation"),
        parent_uuid: r.get("parent_uuid"),
        root_uuid: r.get("root_uuid"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

pub(crate) const PROVIDER_COLUMNS: &str = "uuid, name, generation, parent_uuid, root_uuid, created_at, updated_at";

impl Store {
    pub async fn provider(&self, uuid: Uuid) -> Result<Provider, Error> {
        let c = self.client().await?;
        let row = c
            .query_opt(&format!("SELECT {PROVIDER_COLUMNS} FROM providers WHERE uuid = $1"), &[&uuid])
            .await
            .map_err(crate::StoreError::from)?;
        row.map(|r| provider(&r))
            .ok_or_else(|| Error::not_found(ErrorCode::NotFound, format!("no resource provider {uuid}")))
    }

    pub async fn providers(&self) -> Result<Vec<Provider>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(&format!("SELECT {PROVIDER_COLUMNS} FROM providers ORDER BY name"), &[])
            .await
            .map_err(crate::StoreError::from)?;
        Ok(rows.iter().map(provider).collect())
    }

    pub async fn inventories(&self, uuid: Uuid) -> Result<BTreeMap<String, Inventory>, Error> {
        let c = self.client().await?;
        Ok(inventories_of(&c, uuid).await?)
    }

    pub async fn consumer(&self, uuid: Uuid) -> Result<Option<Consumer>, Error> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT uuid, project_id, user_id, consumer_type, generation FROM consumers WHERE uuid = $1",
                &[&uuid],
            )
            .await
            .map_err(crate::StoreError::from)?;
        Ok(row.map(|r| Consumer {
            uuid: r.get("uuid"),
            project_id: r.get("project_id"),
            user_id: r.get("user_id"),
            consumer_type: r.get("consumer_type"),
            generation: r.get("generation"),
        }))
    }

    /// Allocations on a provider that overlap `within` (all, when `None`).
    #[cfg(feature = "testing")]
    pub async fn provider_allocations(&self, uuid: Uuid, within: Option<Window>) -> Result<Vec<AllocationRow>, Error> {
        let (s, e) = within.map(|w| (Some(w.start), w.end)).unwrap_or((None, None));
        self.allocation_rows(
            "provider_uuid = $1 AND ($2::timestamptz IS NULL OR during && tstzrange($2, $3, '[)'))",
            &[&uuid, &s, &e],
        )
        .await
    }

    pub async fn consumer_allocations(&self, uuid: Uuid) -> Result<Vec<AllocationRow>, Error> {
        self.allocation_rows("consumer_uuid = $1", &[&uuid]).await
    }

    async fn allocation_rows(
        &self,
        filter: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<AllocationRow>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT consumer_uuid, provider_uuid, resource_class, used, lower(during) AS start_at,
                            upper(during) AS end_at
                     FROM allocations WHERE {filter} ORDER BY consumer_uuid, provider_uuid, resource_class, lower(during)"
                ),
                params,
            )
            .await
            .map_err(crate::StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| AllocationRow {
                consumer: r.get("consumer_uuid"),
                provider: r.get("provider_uuid"),
                resource_class: r.get("resource_class"),
                used: r.get("used"),
                window: Window { start: r.get("start_at"), end: r.get("end_at") },
            })
            .collect())
    }

    /// Usage per class on a provider at instant `at`.
    #[cfg(feature = "testing")]
    pub async fn provider_usage_at(&self, uuid: Uuid, at: DateTime<Utc>) -> Result<BTreeMap<String, i64>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT resource_class, sum(used)::int8 AS used FROM allocations
                 WHERE provider_uuid = $1 AND during @> $2::timestamptz GROUP BY resource_class",
                &[&uuid, &at],
            )
            .await
            .map_err(crate::StoreError::from)?;
        Ok(rows.iter().map(|r| (r.get("resource_class"), r.get("used"))).collect())
    }
}
