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
pub(crate) mod fit;
pub(crate) mod free;
pub mod hosts;
pub mod lease_events;
pub mod leases;
pub mod manager;
pub(crate) mod named_hosts;
pub(crate) mod near;
pub mod placement;
pub mod quotas;
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
    Ok(rows.iter().map(|r| (r.get(0), inventory_at(r, 1))).collect())
}

/// The inventory in the six columns starting at `i`.
pub(crate) fn inventory_at(r: &tokio_postgres::Row, i: usize) -> Inventory {
    Inventory {
        total: r.get(i),
        reserved: r.get(i + 1),
        min_unit: r.get(i + 2),
        max_unit: r.get(i + 3),
        step_size: r.get(i + 4),
        allocation_ratio: r.get(i + 5),
    }
}

pub(crate) fn provider(r: &tokio_postgres::Row) -> Provider {
    Provider {
        uuid: r.get(0),
        name: r.get(1),
        generation: r.get(2),
        parent_uuid: r.get(3),
        root_uuid: r.get(4),
        created_at: r.get(5),
        updated_at: r.get(6),
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
            uuid: r.get(0),
            project_id: r.get(1),
            user_id: r.get(2),
            consumer_type: r.get(3),
            generation: r.get(4),
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
                    "SELECT consumer_uuid, provider_uuid, resource_class, used, lower(during), upper(during)
                     FROM allocations WHERE {filter} ORDER BY consumer_uuid, provider_uuid, resource_class, lower(during)"
                ),
                params,
            )
            .await
            .map_err(crate::StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| AllocationRow {
                consumer: r.get(0),
                provider: r.get(1),
                resource_class: r.get(2),
                used: r.get(3),
                window: Window { start: r.get(4), end: r.get(5) },
            })
            .collect())
    }

    /// Usage per class on a provider at instant `at`.
    #[cfg(feature = "testing")]
    pub async fn provider_usage_at(&self, uuid: Uuid, at: DateTime<Utc>) -> Result<BTreeMap<String, i64>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT resource_class, sum(used)::int8 FROM allocations
                 WHERE provider_uuid = $1 AND during @> $2::timestamptz GROUP BY resource_class",
                &[&uuid, &at],
            )
            .await
            .map_err(crate::StoreError::from)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}
