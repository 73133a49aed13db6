//! The rows the lock statements answer, decoded by column name beside the
//! statements: the commands that pipeline a lock read its rows through
//! these, not by position.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

/// A lease locked by [`super::LEASES_STATUS`], with what the manager's
/// recorder decides on.
pub(crate) struct LockedLease {
    pub id: Uuid,
    pub status: String,
    pub degraded: bool,
}

impl LockedLease {
    pub(crate) fn from_row(r: &Row) -> LockedLease {
        LockedLease { id: r.get("id"), status: r.get("status"), degraded: r.get("degraded") }
    }
}

/// A lease event locked by [`super::LEASE_EVENTS`], with its state.
pub(crate) struct LockedEvent {
    pub id: Uuid,
    pub status: String,
    pub attempts: i32,
    pub claimed_by: Option<String>,
    pub event_type: String,
}

impl LockedEvent {
    pub(crate) fn from_row(r: &Row) -> LockedEvent {
        LockedEvent {
            id: r.get("id"),
            status: r.get("status"),
            attempts: r.get("attempts"),
            claimed_by: r.get("claimed_by"),
            event_type: r.get("event_type"),
        }
    }
}

/// A lease event a claimer holds in progress ([`super::claimed_events`]).
pub(crate) struct ClaimedEvent {
    pub lease_id: Uuid,
    pub id: Uuid,
    pub attempts: i32,
}

impl ClaimedEvent {
    pub(crate) fn from_row(r: &Row) -> ClaimedEvent {
        ClaimedEvent { lease_id: r.get("lease_id"), id: r.get("id"), attempts: r.get("attempts") }
    }
}

/// A consumer locked by [`super::consumers`].
pub(crate) struct LockedConsumer {
    pub uuid: Uuid,
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: Option<String>,
}

impl LockedConsumer {
    pub(crate) fn from_row(r: &Row) -> LockedConsumer {
        LockedConsumer {
            uuid: r.get("uuid"),
            project_id: r.get("project_id"),
            user_id: r.get("user_id"),
            consumer_type: r.get("consumer_type"),
        }
    }
}

/// A row of [`super::CONSUMERS_HOLDING`]: a consumer locked, and one of its
/// allocations (`provider` None when it holds nothing).
pub(crate) struct ConsumerHolding {
    pub uuid: Uuid,
    pub generation: i64,
    pub consumer_type: Option<String>,
    pub provider: Option<Uuid>,
    pub resource_class: Option<String>,
    pub used: Option<i64>,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
}

impl ConsumerHolding {
    pub(crate) fn from_row(r: &Row) -> ConsumerHolding {
        ConsumerHolding {
            uuid: r.get("uuid"),
            generation: r.get("generation"),
            consumer_type: r.get("consumer_type"),
            provider: r.get("provider_uuid"),
            resource_class: r.get("resource_class"),
            used: r.get("used"),
            start: r.get("start_at"),
            end: r.get("end_at"),
        }
    }
}

/// A row of [`super::PROVIDERS_WITH_INVENTORIES`]: a provider locked, and
/// one of its inventories with its class (None when it has none).
pub(crate) struct ProviderInventory {
    pub uuid: Uuid,
    pub generation: i64,
    pub inventory: Option<(String, berth_core::Inventory)>,
}

impl ProviderInventory {
    pub(crate) fn from_row(r: &Row) -> ProviderInventory {
        let inventory = r.get::<_, Option<String>>("resource_class").map(|class| (class, crate::queries::inventory(r)));
        ProviderInventory { uuid: r.get("uuid"), generation: r.get("generation"), inventory }
    }
}

/// A provider locked by [`super::providers`].
pub(crate) struct LockedProvider {
    pub uuid: Uuid,
    pub generation: i64,
    pub parent_uuid: Option<Uuid>,
}

impl LockedProvider {
    pub(crate) fn from_row(r: &Row) -> LockedProvider {
        LockedProvider { uuid: r.get("uuid"), generation: r.get("generation"), parent_uuid: r.get("parent_uuid") }
    }
}

/// An enrolled host's provider locked by [`super::host`].
pub(crate) struct LockedHost {
    pub reservable: bool,
    pub capabilities: Value,
}

impl LockedHost {
    pub(crate) fn from_row(r: &Row) -> LockedHost {
        LockedHost { reservable: r.get("reservable"), capabilities: r.get("capabilities") }
    }
}

/// A provider locked by name by [`super::providers_named`].
pub(crate) struct NamedProvider {
    pub name: String,
    pub uuid: Uuid,
}

impl NamedProvider {
    pub(crate) fn from_row(r: &Row) -> NamedProvider {
        NamedProvider { name: r.get("name"), uuid: r.get("uuid") }
    }
}

/// A provider chosen by a new lease ([`super::CHOSEN_UNLESS_WRITTEN`],
/// [`super::CHOSEN`]), and whether no other new lease writes it.
pub(crate) struct Chosen {
    pub provider: Uuid,
    pub free: bool,
}

impl Chosen {
    pub(crate) fn from_row(r: &Row) -> Chosen {
        Chosen { provider: r.get("provider"), free: r.get("free") }
    }
}
