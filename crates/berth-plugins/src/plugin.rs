//! The plugin contract.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What a reservation needs from the providers, for the scheduler to place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResourceRequest {
    /// Between `min` and `max` whole hosts, each held entirely over the
    /// window, among enrolled hosts matching both property filters (Blazar's
    /// query language, already validated).
    Hosts {
        min: u32,
        max: u32,
        hypervisor_properties: Option<serde_json::Value>,
        resource_properties: Option<serde_json::Value>,
    },
    /// `amount` slots of `resources` each on enrolled hosts; `affinity`
    /// true: all on one host, false: all on different hosts, None: any;
    /// on hosts whose Placement traits match `traits` (a flavor's).
    Slots {
        amount: u32,
        resources: BTreeMap<String, i64>,
        affinity: Option<bool>,
        resource_properties: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "berth_core::flavor::Traits::is_empty")]
        traits: berth_core::flavor::Traits,
    },
    /// Nothing held in Berth's inventory: the plugin's effects are all outside.
    Nothing,
}

/// Everything a hook call knows. The same `idempotency_key` is sent on every
/// attempt of the same lease event, so the far side can apply it once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hook {
    /// `start_lease`, `before_end_lease`, `end_lease`, `update_lease` or
    /// `heal_lease`.
    pub event_type: String,
    pub idempotency_key: String,
    pub attempt: u32,
    /// The lease as the API shows it (id, name, project_id, user_id, dates...).
    pub lease: serde_json::Value,
    /// The reservation (id, resource_type, its parameters, status).
    pub reservation: serde_json::Value,
    /// What the reservation holds: provider uuid and name, consumer, resources.
    pub allocations: Vec<serde_json::Value>,
}

/// What a hook did (`detail`, free-form, kept in the log) and what it asks
/// Berth to record beside the lease event's outcome (`effects`: pool moves,
/// consumers gone, hosts held back), which the manager records through
/// berth-store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookOutcome {
    pub detail: serde_json::Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<berth_core::lease_event::Effect>,
}

/// A hook failed. `permanent` failures are not retried.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    pub permanent: bool,
    pub message: String,
}

impl HookError {
    pub fn retryable(message: impl Into<String>) -> Self {
        HookError { permanent: false, message: message.into() }
    }
    pub fn permanent(message: impl Into<String>) -> Self {
        HookError { permanent: true, message: message.into() }
    }
}

/// One reservation type.
#[async_trait]
pub trait ResourcePlugin: Send + Sync {
    /// The `resource_type` leases name, e.g. `physical:host`.
    fn resource_type(&self) -> &str;

    /// Checks a reservation's parameters (the reservation object as the
    /// client sent it) and says what it needs. Bad parameters are
    /// `ErrorKind::Invalid` with the field named.
    async fn validate(&self, reservation: &serde_json::Value) -> Result<ResourceRequest, berth_core::Error>;

    /// The parameters a reservation of this type takes, with their types;
    /// `None` when the plugin checks its parameters itself (external
    /// plugins, in their `validate`).
    fn parameters(&self) -> Option<&'static [crate::params::Param]> {
        None
    }

    /// The kind of driver the plugin acts through (`noop`, `webhook`,
    /// `exec`), as `GET /v1/plugins` shows it; `None` for a plugin that
    /// acts through none.
    fn driver_kind(&self) -> Option<&'static str> {
        None
    }

    /// Whether the plugin is served over the protocol (an external type)
    /// rather than compiled in.
    fn is_external(&self) -> bool {
        false
    }

    /// The Placement consumers a reservation names for its hooks to act on
    /// (e.g. the instances to wake up and delete). The lease API lets a
    /// caller name only its own project's consumers, so that a hook never
    /// acts on another project's resources.
    fn named_consumers(&self, _reservation: &serde_json::Value) -> Vec<String> {
        Vec::new()
    }

    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError>;

    async fn before_end(&self, hook: &Hook) -> Result<HookOutcome, HookError>;

    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError>;

    /// A lease changed (dates or parameters) while the reservation stands.
    async fn on_update(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }

    /// Slots of a started lease moved off hosts that became unusable
    /// (healing). `event_type` is `heal_lease`; `allocations` lists each
    /// moved slot on its new host, with the host it left as `replaces`
    /// (`{"uuid", "name"}`). The host plugin moves the new hosts into the
    /// lease's pool and the failed ones out (as effects).
    async fn on_heal(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }

    /// Hosts held back at a lease's end (`recycle`) are due back in the free
    /// pool: their grace period has passed or their other consumers are
    /// gone. `event_type` is `return_hosts`; `allocations` lists the hosts
    /// with the consumers still on them. Berth returns the hosts to the free
    /// pool after recording the effects answered.
    async fn on_return(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }

    /// Capacity lent to a preemptible consumer is due back: an owner needs
    /// it within the reclaim lead. `event_type` is `reclaim`; `lease` is
    /// null; `allocations` lists what the consumer borrowed (its
    /// `consumer_id`, the Placement consumer, is the instance). The plugin
    /// empties it (the instance plugin deletes or shelves the instance).
    /// Not implemented: the reclaim fails for good, and the operator sees it.
    async fn on_reclaim(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Err(HookError::permanent(format!("{} reclaims nothing", self.resource_type())))
    }
}
