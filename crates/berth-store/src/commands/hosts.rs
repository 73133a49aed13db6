//! Hosts: providers enrolled in the free pool of reservable hosts, with
//! their extra capabilities.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::error::ErrorCode;
use berth_core::lease::FREE_POOL;
use berth_core::{Error, Event, EventMeta, Inventory};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde_json::Value;
use uuid::Uuid;

use super::request_keys::{self, Keyed, RequestKey};
use super::{now, record};
use crate::{Store, StoreError};

/// Host fields that are not extra capabilities.
pub const HOST_FIELDS: &[&str] = &[
    "id",
    "name",
    "hypervisor_hostname",
    "vcpus",
    "memory_mb",
    "local_gb",
    "reservable",
    "created_at",
    "updated_at",
    "hypervisor_type",
    "hypervisor_version",
    "cpu_info",
    "service_name",
    "status",
    "trust_id",
    "disabled",
    "disabled_reason",
];

/// A host to enrol: an existing provider named `name`, or a new one when
/// `resources` (vcpus, memory_mb, local_gb) are given.
#[derive(Debug, Clone)]
pub struct NewHost {
    pub name: String,
    pub resources: Option<(i64, i64, i64)>,
    pub reservable: bool,
    pub capabilities: BTreeMap<String, Value>,
}

/// A change to a host; a capability set to `null` is removed.
#[derive(Debug, Clone, Default)]
pub struct HostChange {
    pub reservable: Option<bool>,
    pub capabilities: BTreeMap<String, Value>,
}

pub fn check_capabilities(caps: &BTreeMap<String, Value>, allow_null: bool) -> Result<(), Error> {
    for (k, v) in caps {
        if k.is_empty() || k.len() > 255 || HOST_FIELDS.contains(&k.as_str()) {
            return Err(Error::invalid(ErrorCode::HostInvalid, format!("{k:?} cannot be an extra capability name")));
        }
        let ok = matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) || (allow_null && v.is_null());
        if !ok {
            return Err(Error::invalid(
                ErrorCode::HostInvalid,
                format!("extra capability {k}: {v} is not a string, number or boolean"),
            ));
        }
    }
    Ok(())
}

/// Locks an enrolled host's provider row; returns (reservable, capabilities).
async fn lock_host(tx: &Transaction<'_>, id: Uuid) -> Result<(bool, BTreeMap<String, Value>), StoreError> {
    let Some(row) = crate::lock::host(tx, id).await? else {
        return Err(Error::not_found(ErrorCode::HostNotFound, format!("no host {id}")).into());
    };
    Ok((row.reservable, serde_json::from_value(row.capabilities).unwrap_or_default()))
}

async fn aggregates(tx: &Transaction<'_>, provider: Uuid) -> Result<BTreeSet<Uuid>, StoreError> {
    Ok(tx
        .query("SELECT aggregate FROM provider_aggregates WHERE provider_uuid = $1", &[&provider])
        .await?
        .iter()
        .map(|r| r.get("aggregate"))
        .collect())
}

impl Store {
    /// Enrols a host in the free pool; returns its id (the provider's uuid).
    pub async fn enrol_host(&self, meta: &EventMeta, new: NewHost) -> Result<Uuid, Error> {
        check_new_host(&new)?;
        crate::tx::command!(self, |tx| {
            let (provider, events, _) = enrol_in(tx, &new).await?;
            record(tx, meta, &events).await?;
            Ok(provider)
        })
    }

    /// As [`Store::enrol_host`], under an idempotency key: the same request
    /// again within a day answers the host it enrolled.
    pub async fn enrol_host_keyed(
        &self,
        meta: &EventMeta,
        new: NewHost,
        key: &RequestKey,
    ) -> Result<Keyed<Uuid>, Error> {
        check_new_host(&new)?;
        crate::tx::command!(self, |tx| {
            if let Some(ids) = request_keys::earlier(tx, key).await? {
                let host = ids.first().copied().ok_or_else(|| Error::internal("a host request key with no host"))?;
                return Ok(Keyed::Earlier(host));
            }
            let (provider, mut events, at) = enrol_in(tx, &new).await?;
            events.push(request_keys::made(key, vec![provider], at));
            record(tx, meta, &events).await?;
            Ok(Keyed::Made(provider))
        })
    }

    /// Changes a host's extra capabilities (merged; `null` removes one) and
    /// whether it is reservable.
    pub async fn update_host(&self, meta: &EventMeta, id: Uuid, change: HostChange) -> Result<(), Error> {
        check_capabilities(&change.capabilities, true)?;
        crate::tx::command!(self, |tx| {
            let (reservable, mut caps) = lock_host(tx, id).await?;
            for (k, v) in &change.capabilities {
                if v.is_null() {
                    caps.remove(k);
                } else {
                    caps.insert(k.clone(), v.clone());
                }
            }
            let reservable = change.reservable.unwrap_or(reservable);
            let at = now(tx).await?;
            let mut events = vec![Event::HostUpdated { provider: id, reservable, capabilities: caps, at }];
            // Made reservable again: a host held back at a lease's end
            // (shared, recycle) returns to the free pool.
            if change.reservable == Some(true)
                && tx.query_opt("SELECT 1 FROM host_holds WHERE provider_uuid = $1", &[&id]).await?.is_some()
            {
                let mut aggs = aggregates(tx, id).await?;
                aggs.remove(&berth_core::lease_event::SHARED_POOL);
                aggs.remove(&berth_core::lease_event::RECYCLE_POOL);
                aggs.insert(FREE_POOL);
                events.push(Event::ProviderAggregatesReplaced { provider: id, aggregates: aggs, bump: true, at });
                events.push(Event::HostHoldReleased { provider: id, at });
            }
            record(tx, meta, &events).await?;
            Ok(())
        })
    }

    /// Takes a host out of the free pool. A host that a current or future
    /// lease holds stays (409). The provider itself remains in Placement.
    pub async fn remove_host(&self, meta: &EventMeta, id: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            lock_host(tx, id).await?;
            let at = now(tx).await?;
            let held = tx
                .query_opt(
                    "SELECT l.id AS lease_id FROM reservation_slots s
                     JOIN reservations r ON r.id = s.reservation_id
                     JOIN leases l ON l.id = r.lease_id
                     WHERE s.provider_uuid = $1 AND l.end_at > $2 LIMIT 1",
                    &[&id, &at],
                )
                .await?;
            if let Some(row) = held {
                let lease: Uuid = row.get("lease_id");
                return Err(Error::in_use(
                    ErrorCode::HostInUse,
                    format!("host {id} is held by lease {lease}, which has not ended"),
                )
                .into());
            }
            let mut events = Vec::new();
            let mut aggs = aggregates(tx, id).await?;
            if aggs.remove(&FREE_POOL) {
                events.push(Event::ProviderAggregatesReplaced { provider: id, aggregates: aggs, bump: true, at });
            }
            events.push(Event::HostRemoved { provider: id, at });
            record(tx, meta, &events).await?;
            Ok(())
        })
    }

    /// Makes a host property private (listed to admins only) or public.
    pub async fn set_host_property(&self, meta: &EventMeta, name: &str, private: bool) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            if !crate::lock::host_property(tx, name).await? {
                return Err(Error::not_found(ErrorCode::PropertyNotFound, format!("no host property {name:?}")).into());
            }
            record(tx, meta, &[Event::HostPropertyChanged { name: name.to_string(), private, at: now(tx).await? }])
                .await?;
            Ok(())
        })
    }
}

/// What can be refused before a transaction starts.
fn check_new_host(new: &NewHost) -> Result<(), Error> {
    check_capabilities(&new.capabilities, false)?;
    if new.name.is_empty() || new.name.chars().count() > 200 {
        return Err(Error::invalid(ErrorCode::HostInvalid, "a host name is 1 to 200 characters"));
    }
    if let Some((v, m, d)) = new.resources {
        if v < 1 || m < 1 || d < 0 {
            return Err(Error::invalid(
                ErrorCode::HostInvalid,
                "vcpus and memory_mb must be at least 1, local_gb at least 0",
            ));
        }
    }
    Ok(())
}

/// Enrols `new` in `tx`: the host's provider (made when it is new), its
/// place in the free pool, its enrolment; the events (not yet recorded) and
/// the database's time.
async fn enrol_in(tx: &Transaction<'_>, new: &NewHost) -> Result<(Uuid, Vec<Event>, DateTime<Utc>), StoreError> {
    let at = now(tx).await?;
    let mut events = Vec::new();
    let provider = match crate::lock::provider_named(tx, &new.name).await? {
        Some(uuid) => {
            if tx.query_opt("SELECT 1 FROM hosts WHERE provider_uuid = $1", &[&uuid]).await?.is_some() {
                return Err(Error::conflict(
                    ErrorCode::HostExists,
                    format!("host {} is already enrolled as {uuid}", new.name),
                )
                .into());
            }
            uuid
        }
        None => {
            let Some((vcpus, memory_mb, local_gb)) = new.resources else {
                return Err(Error::not_found(
                    ErrorCode::HostNotFound,
                    format!(
                        "no resource provider named {:?}: register it through Placement first, \
                         or give vcpus, memory_mb and local_gb to create it",
                        new.name
                    ),
                )
                .into());
            };
            let uuid = Uuid::new_v4();
            let mut inventories = BTreeMap::from([
                ("VCPU".to_string(), Inventory { total: vcpus, ..Default::default() }),
                ("MEMORY_MB".to_string(), Inventory { total: memory_mb, ..Default::default() }),
            ]);
            if local_gb > 0 {
                inventories.insert("DISK_GB".into(), Inventory { total: local_gb, ..Default::default() });
            }
            for (class, inv) in &inventories {
                inv.validate(class)?;
            }
            events.push(Event::ProviderCreated { uuid, name: new.name.clone(), parent: None, at });
            events.push(Event::InventoriesReplaced { provider: uuid, inventories, at });
            uuid
        }
    };
    let mut aggs = aggregates(tx, provider).await?;
    if aggs.insert(FREE_POOL) {
        events.push(Event::ProviderAggregatesReplaced { provider, aggregates: aggs, bump: true, at });
    }
    events.push(Event::HostEnrolled {
        provider,
        reservable: new.reservable,
        capabilities: new.capabilities.clone(),
        at,
    });
    Ok((provider, events, at))
}
