//! Hosts: providers enrolled in the free pool of reservable hosts, with
//! their extra capabilities.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use berth_core::error::ErrorCode;
use berth_core::lease::FREE_POOL;
use berth_core::{Error, Event, EventMeta, Inventory};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde_json::Value;
use uuid::Uuid;

use super::request_keys::{self, Keyed, RequestKey};
use super::{now, record};
use crate::lock::NamedProvider;
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
            let (providers, events, _) = enrol_in(tx, std::slice::from_ref(&new)).await?;
            record(tx, meta, &events).await?;
            Ok(providers[0])
        })
    }

    /// Enrols many hosts at once, all or none, in one transaction whose
    /// round trips do not grow with their number (an operator's whole
    /// rack or cloud; a test's ten thousand): their ids, in order. Each
    /// is enrolled as [`Store::enrol_host`] would, and refused for the
    /// same reasons, the first one refused naming the refusal; a name
    /// given twice is refused.
    pub async fn enrol_hosts(&self, meta: &EventMeta, hosts: Vec<NewHost>) -> Result<Vec<Uuid>, Error> {
        let mut names = HashSet::new();
        for new in &hosts {
            check_new_host(new)?;
            if !names.insert(new.name.as_str()) {
                return Err(Error::invalid(ErrorCode::HostInvalid, format!("host {:?} is named twice", new.name)));
            }
        }
        if hosts.is_empty() {
            return Ok(Vec::new());
        }
        crate::tx::command!(self, |tx| {
            let (providers, events, _) = enrol_in(tx, &hosts).await?;
            record(tx, meta, &events).await?;
            Ok(providers)
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
            let (providers, mut events, at) = enrol_in(tx, std::slice::from_ref(&new)).await?;
            events.push(request_keys::made(key, providers.clone(), at));
            record(tx, meta, &events).await?;
            Ok(Keyed::Made(providers[0]))
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

/// Enrols `hosts` (distinct names) in `tx`: each host's provider (made
/// when it is new), its place in the free pool, its enrolment. The
/// providers in order, the events (not yet recorded) grouped by kind, so
/// that each kind is applied as one run (`projection::enrolments`), and
/// the database's time.
async fn enrol_in(
    tx: &Transaction<'_>,
    hosts: &[NewHost],
) -> Result<(Vec<Uuid>, Vec<Event>, DateTime<Utc>), StoreError> {
    let at = now(tx).await?;
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    let existing: HashMap<String, NamedProvider> =
        crate::lock::providers_named(tx, &names).await?.into_iter().map(|p| (p.name.clone(), p)).collect();
    // Read once their rows are locked, each statement seeing what the
    // enrolment that held a lock before this one committed.
    let old: Vec<Uuid> = existing.values().map(|p| p.uuid).collect();
    let (mut hosts_now, mut pools) = (HashSet::new(), HashMap::<Uuid, BTreeSet<Uuid>>::new());
    if !old.is_empty() {
        let [host_rows, pool_rows] = crate::sql::pipeline(
            tx,
            [
                ("SELECT provider_uuid FROM hosts WHERE provider_uuid = ANY($1)", &[&old]),
                ("SELECT provider_uuid, aggregate FROM provider_aggregates WHERE provider_uuid = ANY($1)", &[&old]),
            ],
        )
        .await?;
        hosts_now.extend(host_rows.iter().map(|r| r.get::<_, Uuid>("provider_uuid")));
        for r in pool_rows {
            pools.entry(r.get("provider_uuid")).or_default().insert(r.get("aggregate"));
        }
    }
    let (mut created, mut inventories, mut enrolled) = (Vec::new(), Vec::new(), Vec::new());
    let mut providers = Vec::with_capacity(hosts.len());
    for new in hosts {
        let provider = match existing.get(&new.name) {
            Some(p) if hosts_now.contains(&p.uuid) => {
                let message = format!("host {} is already enrolled as {}", new.name, p.uuid);
                return Err(Error::conflict(ErrorCode::HostExists, message).into());
            }
            Some(p) => p.uuid,
            None => {
                let uuid = Uuid::new_v4();
                created.push(Event::ProviderCreated { uuid, name: new.name.clone(), parent: None, at });
                inventories.push(Event::InventoriesReplaced {
                    provider: uuid,
                    inventories: made_inventories(new)?,
                    at,
                });
                uuid
            }
        };
        providers.push(provider);
        enrolled.push(Event::HostEnrolled {
            provider,
            reservable: new.reservable,
            capabilities: new.capabilities.clone(),
            at,
        });
    }
    // A new provider is in no aggregate; an existing one keeps its own.
    let mut pooled = Vec::new();
    for &provider in &providers {
        let mut aggregates = pools.remove(&provider).unwrap_or_default();
        if aggregates.insert(FREE_POOL) {
            pooled.push(Event::ProviderAggregatesReplaced { provider, aggregates, bump: true, at });
        }
    }
    let events = [created, inventories, pooled, enrolled].concat();
    Ok((providers, events, at))
}

/// The inventories of a host's new provider, from its resources; refused
/// when the host names a provider that does not exist and no resources.
fn made_inventories(new: &NewHost) -> Result<BTreeMap<String, Inventory>, Error> {
    let Some((vcpus, memory_mb, local_gb)) = new.resources else {
        return Err(Error::not_found(
            ErrorCode::HostNotFound,
            format!(
                "no resource provider named {:?}: register it through Placement first, \
                 or give vcpus, memory_mb and local_gb to create it",
                new.name
            ),
        ));
    };
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
    Ok(inventories)
}
