//! The events of the append-only log. Every change Berth makes is one of
//! these; the projections are what applying them in log order gives.
//!
//! Events carry everything their application needs (including the time the
//! command decided on), so that replaying the log reproduces the projections
//! exactly.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::inventory::Inventory;
use crate::lease::{LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus, ReservationStatus};
use crate::lease_event::HookResult;
use crate::quota::Scope;
use crate::window::Window;

/// One allocation: `used` of a class on a provider, held over `window`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub provider: Uuid,
    pub resource_class: String,
    pub used: i64,
    pub window: Window,
}

/// A reservation slot moved off a host that became unusable: its consumer
/// now holds on `to` what it held on `from`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotMove {
    pub consumer: Uuid,
    pub from: Uuid,
    pub to: Uuid,
    /// What the slot holds on `to` (a whole host's inventory for a host).
    pub resources: BTreeMap<String, i64>,
}

mod parts;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    ResourceClassCreated {
        name: String,
    },
    ResourceClassDeleted {
        name: String,
    },
    /// A custom class renamed; its inventories and allocations follow.
    ResourceClassRenamed {
        from: String,
        to: String,
    },
    TraitCreated {
        name: String,
    },
    TraitDeleted {
        name: String,
    },
    ProviderCreated {
        uuid: Uuid,
        name: String,
        parent: Option<Uuid>,
        at: DateTime<Utc>,
    },
    /// Rename and/or re-parent; the subtree's root follows the new parent.
    ProviderUpdated {
        uuid: Uuid,
        name: String,
        parent: Option<Uuid>,
        at: DateTime<Utc>,
    },
    ProviderDeleted {
        uuid: Uuid,
    },
    /// The provider's whole inventory, replaced; bumps its generation.
    InventoriesReplaced {
        provider: Uuid,
        inventories: BTreeMap<String, Inventory>,
        at: DateTime<Utc>,
    },
    ProviderTraitsReplaced {
        provider: Uuid,
        traits: BTreeSet<String>,
        at: DateTime<Utc>,
    },
    /// `bump` is false for Placement before 1.19, which did not bump the
    /// generation on aggregate changes.
    ProviderAggregatesReplaced {
        provider: Uuid,
        aggregates: BTreeSet<Uuid>,
        bump: bool,
        at: DateTime<Utc>,
    },
    /// A consumer's whole allocation set, replaced (empty: deleted). Bumps the
    /// consumer's generation, and that of the providers in `providers_bumped`
    /// when given (a Placement request decides them: each provider it
    /// allocates from, once per request, but not those it only releases),
    /// else of every provider the consumer held or now holds.
    AllocationsReplaced {
        consumer: Uuid,
        project_id: String,
        user_id: String,
        consumer_type: Option<String>,
        allocations: Vec<Allocation>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        providers_bumped: Option<Vec<Uuid>>,
        at: DateTime<Utc>,
    },
    // Leases and hosts. A lease's slot consumers hold their allocations
    // through `AllocationsReplaced` events recorded beside these.
    /// A lease with its reservations (and their slots) and lease events.
    LeaseCreated {
        lease: LeaseRecord,
        at: DateTime<Utc>,
    },
    /// Name, window and reservations replaced; lease events keep their
    /// status and only move in time.
    LeaseUpdated {
        lease: LeaseRecord,
        at: DateTime<Utc>,
    },
    LeaseDeleted {
        id: Uuid,
        at: DateTime<Utc>,
    },
    /// Part of lease `from` moved into the new lease `lease` (same window,
    /// new ids): `moved` names, per reservation of `from`, the slot
    /// consumers that now belong to `lease`. `from`'s own `LeaseUpdated`,
    /// recorded just before, already gave them up.
    LeaseSplit {
        from: Uuid,
        lease: LeaseRecord,
        moved: BTreeMap<Uuid, Vec<Uuid>>,
        at: DateTime<Utc>,
    },
    /// The lease's project offers it to `to_project` (replacing any earlier
    /// offer); `offered_by`: the user who offered it.
    LeaseTransferOffered {
        id: Uuid,
        to_project: String,
        offered_by: String,
        at: DateTime<Utc>,
    },
    /// The offer of the lease is withdrawn.
    LeaseTransferWithdrawn {
        id: Uuid,
        at: DateTime<Utc>,
    },
    /// The lease now belongs to `to_project` and `user_id`; any offer of it
    /// is spent. Its slots' allocations follow beside this.
    LeaseTransferred {
        id: Uuid,
        from_project: String,
        to_project: String,
        user_id: String,
        at: DateTime<Utc>,
    },
    LeaseStatusChanged {
        id: Uuid,
        status: LeaseStatus,
        degraded: bool,
        at: DateTime<Utc>,
    },
    ReservationStatusChanged {
        lease: Uuid,
        reservation: Uuid,
        status: ReservationStatus,
        at: DateTime<Utc>,
    },
    /// A lease event's whole state: status, attempts, last error and claim.
    LeaseEventChanged {
        lease: Uuid,
        event: Uuid,
        status: LeaseEventStatus,
        attempts: i32,
        last_error: Option<String>,
        claimed_by: Option<String>,
        claim_expires_at: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    },
    /// A manager claimed a due lease event: attempt `attempt` begins, and
    /// the claim holds until `claim_expires_at` unless renewed.
    /// `rescued_from`: the claimer whose claim had expired (it died).
    LeaseEventClaimed {
        lease: Uuid,
        event: Uuid,
        event_type: LeaseEventType,
        attempt: i32,
        claimed_by: String,
        claim_expires_at: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rescued_from: Option<String>,
        at: DateTime<Utc>,
    },
    /// The claimer still works on the event (a hook is running).
    LeaseEventClaimRenewed {
        lease: Uuid,
        event: Uuid,
        claimed_by: String,
        claim_expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// An attempt failed; the event is due again at `retry_at`.
    LeaseEventRetrying {
        lease: Uuid,
        event: Uuid,
        attempt: i32,
        error: String,
        retry_at: DateTime<Utc>,
        hooks: Vec<HookResult>,
        at: DateTime<Utc>,
    },
    /// The last attempt's outcome: `Done`, or `Error` with its error.
    LeaseEventFinished {
        lease: Uuid,
        event: Uuid,
        attempt: i32,
        status: LeaseEventStatus,
        error: Option<String>,
        hooks: Vec<HookResult>,
        at: DateTime<Utc>,
    },
    // Operators' controls (who acted is in the entry's meta).
    /// An ERROR lease event put back to run: UNDONE, attempts reset, due
    /// at `at`.
    LeaseEventRetried {
        lease: Uuid,
        event: Uuid,
        at: DateTime<Utc>,
    },
    /// A waiting lease event cancelled: CANCELLED, it never fires.
    LeaseEventCancelled {
        lease: Uuid,
        event: Uuid,
        at: DateTime<Utc>,
    },
    /// A waiting lease event made due at `at`.
    LeaseEventFired {
        lease: Uuid,
        event: Uuid,
        at: DateTime<Utc>,
    },
    /// A lease taken out of ERROR by an operator who fixed the world: its
    /// new status (not degraded) and its reservations' statuses.
    LeaseRecovered {
        id: Uuid,
        status: LeaseStatus,
        reservations: BTreeMap<Uuid, ReservationStatus>,
        at: DateTime<Utc>,
    },
    /// Every manager of the deployment stops claiming lease events.
    ManagerPaused {
        user_id: String,
        project_id: String,
        at: DateTime<Utc>,
    },
    /// Managers claim again; what fell due meanwhile fires.
    ManagerResumed {
        user_id: String,
        project_id: String,
        at: DateTime<Utc>,
    },
    /// A host held back at a lease's end (recycle or shared): in `pool`,
    /// until `until` (None: until an admin returns it).
    HostHeld {
        provider: Uuid,
        pool: Uuid,
        until: Option<DateTime<Utc>>,
        lease: Uuid,
        at: DateTime<Utc>,
    },
    /// A held-back host is no longer held.
    HostHoldReleased {
        provider: Uuid,
        at: DateTime<Utc>,
    },
    /// A provider enrolled as a reservable host, with its extra capabilities.
    HostEnrolled {
        provider: Uuid,
        reservable: bool,
        capabilities: BTreeMap<String, serde_json::Value>,
        at: DateTime<Utc>,
    },
    HostUpdated {
        provider: Uuid,
        reservable: bool,
        capabilities: BTreeMap<String, serde_json::Value>,
        at: DateTime<Utc>,
    },
    HostRemoved {
        provider: Uuid,
        at: DateTime<Utc>,
    },
    HostPropertyChanged {
        name: String,
        private: bool,
        at: DateTime<Utc>,
    },
    /// A host made unusable (an admin disabled it, or a plugin reported it
    /// failed: `reason` says which), or usable again. An unusable host is
    /// placed nowhere; the reservations holding it are healed beside this.
    HostDisabled {
        provider: Uuid,
        disabled: bool,
        reason: Option<String>,
        at: DateTime<Utc>,
    },
    /// A reservation healed: its slots in `moves` left unusable hosts for
    /// others (their allocations are replaced beside this), and its flags
    /// as they now stand. `hook`: the id of the `on_heal` call its plugin
    /// is owed (its lease has started), which the manager makes.
    ReservationHealed {
        lease: Uuid,
        reservation: Uuid,
        moves: Vec<SlotMove>,
        missing_resources: bool,
        resources_changed: bool,
        hook: Option<Uuid>,
        at: DateTime<Utc>,
    },
    /// A reservation keeps slots on unusable `hosts`: no other host fits
    /// it, or it said `"heal": false`, or a consumer draws from the slot
    /// (`reason`). It is missing resources until it is healed.
    ReservationUnhealed {
        lease: Uuid,
        reservation: Uuid,
        hosts: Vec<Uuid>,
        reason: String,
        at: DateTime<Utc>,
    },
    /// Hosts reserved for maintenance over `window` (Slurm's MAINT): placed
    /// nowhere over it; the leases it hits are healed beside this (`heal`)
    /// or only flagged.
    MaintenanceScheduled {
        id: Uuid,
        hosts: Vec<Uuid>,
        window: Window,
        heal: bool,
        reason: Option<String>,
        at: DateTime<Utc>,
    },
    MaintenanceCancelled {
        id: Uuid,
        at: DateTime<Utc>,
    },
    /// The manager made the `on_heal` call `id` of a lease's reservation;
    /// `hooks` says how it went (its effects are recorded beside this).
    HealHookFinished {
        id: Uuid,
        lease: Uuid,
        hooks: Vec<HookResult>,
        at: DateTime<Utc>,
    },
    /// What `consumer` now draws from the hold of reservation slot `slot`
    /// (empty: nothing; the slot's hold grew back).
    ReservationDrawn {
        slot: Uuid,
        consumer: Uuid,
        resources: BTreeMap<String, i64>,
        at: DateTime<Utc>,
    },
    /// Lease `id` is now shared with `projects` (the whole list; empty:
    /// with none). `hooks`: per reservation, the id of the `on_update` call
    /// its plugin is owed (the lease has started), which the manager makes.
    LeaseShared {
        id: Uuid,
        projects: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        hooks: BTreeMap<Uuid, Uuid>,
        at: DateTime<Utc>,
    },
    /// The manager made the `on_update` call `id` owed after a share;
    /// `hooks` says how it went (its effects are recorded beside this).
    UpdateHookFinished {
        id: Uuid,
        lease: Uuid,
        hooks: Vec<HookResult>,
        at: DateTime<Utc>,
    },
    // Quotas.
    /// Limits set at one level: the resources named; the others stay.
    QuotaSet {
        scope: Scope,
        limits: BTreeMap<String, i64>,
        at: DateTime<Utc>,
    },
    /// Limits removed at one level: the resources named, or all when empty.
    QuotaUnset {
        scope: Scope,
        resources: Vec<String>,
        at: DateTime<Utc>,
    },
    /// A limit was set below what `scope` already holds (its peak from then
    /// on). Nothing is taken away; increases are refused until usage is back
    /// under the limit. Recorded for the record: it changes no projection.
    QuotaOverLimit {
        scope: Scope,
        resource: String,
        limit: i64,
        usage: i64,
        at: DateTime<Utc>,
    },
    /// A create request carrying an `Idempotency-Key` made these (leases,
    /// or a host); the same key from the same caller within a day gets them
    /// again instead of new ones. `fingerprint` is a hash of the request
    /// (its route and body), so the key sent with another request is refused.
    RequestKeyed {
        /// Whose key: the caller's project and user.
        caller: String,
        key: String,
        fingerprint: String,
        created: Vec<Uuid>,
        at: DateTime<Utc>,
    },
    // Lending idle capacity (crate::lend).
    /// A preemptible consumer's allocations, replaced by a loan: each held
    /// from `at` until `until` (`None`: open-ended), when the manager
    /// reclaims it, `lead_s` before the capacity is needed.
    CapacityLent {
        consumer: Uuid,
        project_id: String,
        user_id: String,
        allocations: Vec<Allocation>,
        until: Option<DateTime<Utc>>,
        lead_s: i64,
        at: DateTime<Utc>,
    },
    /// A loan given back: its consumer's allocations were deleted.
    LoanReturned {
        consumer: Uuid,
        at: DateTime<Utc>,
    },
    /// A loan cut short to `until`: a command took the capacity it sat on.
    LoanCut {
        consumer: Uuid,
        until: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// Manager `by` took the due reclaim of a loan, until `expires` (another
    /// manager takes it back after that).
    ReclaimClaimed {
        consumer: Uuid,
        by: String,
        expires: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// The reclaim's outcome through the plugins: done, or failed for good.
    ReclaimFinished {
        consumer: Uuid,
        done: bool,
        detail: serde_json::Value,
        at: DateTime<Utc>,
    },
}

/// Who caused an event and why; stored beside it in the log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What led to this: a lease event id, a log position, a command name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causation: Option<String>,
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // a time for a serialization round trip
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_their_parts() {
        let e = Event::ProviderCreated { uuid: Uuid::nil(), name: "h1".into(), parent: None, at: Utc::now() };
        let (ty, data) = e.to_parts();
        assert_eq!(ty, "ProviderCreated");
        assert_eq!(Event::from_parts(&ty, data).unwrap(), e);
        assert_eq!(e.stream(), format!("provider:{}", Uuid::nil()));
    }
}
