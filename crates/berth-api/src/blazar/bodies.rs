//! The request and response bodies of the Blazar v1 routes and Berth's
//! advice. A request body is read by its type ([`requests`]), which also
//! describes it in `/openapi.json`, and words the refusal of a field it
//! cannot read as Blazar always has; a body may also come wrapped
//! (`{"lease": {...}}`), as Blazar accepts. Most answers are built as JSON
//! and described by the response types here.
//! A reservation carries its plugin's parameters and a host its extra
//! capabilities beside the fixed fields, so no schema here denies unknown
//! fields. `make fuzz` checks the answers against them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

mod offers;
mod requests;
mod transfers;
pub use offers::*;
pub use requests::*;
pub use transfers::*;

/// A `next` link of a full page.
#[derive(Serialize, ToSchema)]
pub struct PageLink {
    rel: String,
    href: String,
}

// ---- leases

/// A slot a reservation holds: a consumer on a provider.
#[derive(Serialize, ToSchema)]
pub struct ReservationAllocation {
    resource_id: Uuid,
    consumer_id: Uuid,
    resources: BTreeMap<String, i64>,
}

/// A reservation, with its plugin's parameters beside these fields.
#[derive(Serialize, ToSchema)]
pub struct Reservation {
    id: Uuid,
    lease_id: Uuid,
    resource_type: String,
    resource_id: Uuid,
    status: String,
    missing_resources: bool,
    resources_changed: bool,
    created_at: String,
    updated_at: String,
    allocations: Vec<ReservationAllocation>,
}

/// One of a lease's events as the lease shows it.
#[derive(Serialize, ToSchema)]
pub struct LeaseEvent {
    id: Uuid,
    lease_id: Uuid,
    event_type: String,
    time: String,
    status: String,
    attempts: i64,
    last_error: Option<String>,
    created_at: String,
    updated_at: String,
}

/// The leases a recurring create made.
#[derive(Serialize, ToSchema)]
pub struct RecurrenceMade {
    id: Option<Uuid>,
    leases: Vec<Uuid>,
}

/// Dates are `YYYY-MM-DD HH:MM` in UTC.
#[derive(Serialize, ToSchema)]
pub struct Lease {
    id: Uuid,
    name: String,
    start_date: String,
    end_date: String,
    before_end_date: Option<String>,
    status: String,
    degraded: bool,
    user_id: String,
    project_id: String,
    trust_id: Option<String>,
    recurrence_id: Option<Uuid>,
    /// The IANA zone a recurring lease's schedule was read in (`UTC` where
    /// it named none); null for a lease that does not recur.
    time_zone: Option<String>,
    created_at: String,
    updated_at: String,
    reservations: Vec<Reservation>,
    events: Vec<LeaseEvent>,
    /// The projects that may draw from it, sorted.
    shared_with: Vec<String>,
    /// A recurring create only.
    #[schema(nullable = false)]
    recurrence: Option<RecurrenceMade>,
    /// The transfer its project offers, while one is pending.
    #[schema(nullable = false)]
    transfer: Option<TransferShown>,
}

#[derive(Serialize, ToSchema)]
pub struct OneLease {
    lease: Lease,
}

#[derive(Serialize, ToSchema)]
pub struct Leases {
    leases: Vec<Lease>,
    #[schema(nullable = false)]
    leases_links: Option<Vec<PageLink>>,
}

#[derive(Serialize, ToSchema)]
pub struct Occurrence {
    start_date: String,
    end_date: String,
    fits: bool,
}

/// What a dry run would book.
#[derive(Serialize, ToSchema)]
pub struct DryRun {
    dry_run: bool,
    count: u64,
    occurrences: Vec<Occurrence>,
}

// ---- advice

#[derive(Serialize, ToSchema)]
pub struct Window {
    pub(super) start_date: String,
    pub(super) end_date: String,
}

#[derive(Serialize, ToSchema)]
pub struct Availability {
    pub(super) availability: Vec<Window>,
    pub(super) from: String,
    pub(super) until: String,
}

/// An offer: a window in which the reservations would fit, as they would be
/// booked (`POST /v1/leases` with `{"offer": id, "name": ...}`).
#[derive(Serialize, ToSchema)]
pub struct Offer {
    /// Books exactly this offer until `expires_at`: signed, carries the
    /// window, the reservations and the lease's id; nothing is held meanwhile.
    pub(super) id: String,
    pub(super) start_date: String,
    pub(super) end_date: String,
    /// Seconds.
    pub(super) duration: i64,
    /// Each reservation as it would be booked, its counts fixed (a host
    /// range's `min` and `max` both the count offered).
    pub(super) reservations: Vec<Value>,
    pub(super) expires_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct Offers {
    pub(super) offers: Vec<Offer>,
    pub(super) from: String,
    pub(super) until: String,
    pub(super) order: String,
}

/// How far a lease could be extended: on what it holds (each reservation
/// and the lease, whose reservations move together) and by the lease
/// policy (its maximum duration, extension window, cut-off and minimum).
#[derive(Serialize, ToSchema)]
pub struct Extension {
    pub(super) lease_id: Uuid,
    pub(super) end_date: String,
    /// The latest end both capacity and policy allow. None: no limit
    /// found before the horizon.
    pub(super) latest_end_date: Option<String>,
    /// What bounds `latest_end_date`: `capacity` or `policy`; None when unbounded.
    #[schema(value_type = Option<String>, example = "capacity")]
    pub(super) limited_by: Option<&'static str>,
    pub(super) horizon: String,
    pub(super) unbounded: bool,
    /// An extension asked now, by at least `minimum_extension`, would be granted.
    pub(super) extendable: bool,
    /// Extensions may be asked from this time (the extension window).
    pub(super) opens_at: Option<String>,
    /// Extensions may be asked until this time (the cut-off).
    pub(super) closes_at: Option<String>,
    /// Seconds: the shortest extension the policy allows.
    pub(super) minimum_extension: Option<i64>,
    pub(super) reservations: Vec<ReservationExtension>,
}

/// How far one reservation could be prolonged on what it holds.
#[derive(Serialize, ToSchema)]
pub struct ReservationExtension {
    pub(super) id: Uuid,
    pub(super) resource_type: String,
    /// None: free until the horizon.
    pub(super) latest_end_date: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct OneExtension {
    pub(super) extension: Extension,
}

// ---- hosts

/// A host, with its extra capabilities (those the caller may see) beside
/// these fields.
#[derive(Serialize, ToSchema)]
pub struct Host {
    id: Uuid,
    hypervisor_hostname: String,
    service_name: String,
    vcpus: i64,
    memory_mb: i64,
    local_gb: i64,
    reservable: bool,
    /// Unusable: placed nowhere, its reservations healed onto other hosts.
    disabled: bool,
    /// Why: `admin`, a plugin's report, or `COMPUTE_STATUS_DISABLED` (its
    /// provider's trait, as Nova sets it).
    disabled_reason: Option<String>,
    trust_id: Option<String>,
    created_at: String,
    updated_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct OneHost {
    host: Host,
}

#[derive(Serialize, ToSchema)]
pub struct Hosts {
    hosts: Vec<Host>,
    #[schema(nullable = false)]
    hosts_links: Option<Vec<PageLink>>,
}

/// What a heal did to one reservation.
#[derive(Serialize, ToSchema)]
pub struct Healed {
    lease_id: Uuid,
    reservation_id: Uuid,
    /// Slots moved to other hosts.
    moved: i64,
    /// Slots left on unusable hosts (no host fits, or `heal: false`).
    missing: i64,
}

/// A changed host, with what healing did.
#[derive(Serialize, ToSchema)]
pub struct ChangedHost {
    host: Host,
    healed: Vec<Healed>,
}

#[derive(Serialize, ToSchema)]
pub struct LeaseOfReservation {
    id: Uuid,
    lease_id: Uuid,
}

#[derive(Serialize, ToSchema)]
pub struct HostAllocation {
    resource_id: Uuid,
    reservations: Vec<LeaseOfReservation>,
}

#[derive(Serialize, ToSchema)]
pub struct HostAllocations {
    allocations: Vec<HostAllocation>,
    #[schema(nullable = false)]
    allocations_links: Option<Vec<PageLink>>,
}

/// None when no reservation holds the host.
#[derive(Serialize, ToSchema)]
pub struct OneHostAllocation {
    allocation: Option<HostAllocation>,
}

/// A capability hosts have (`private` and `values` with `detail`).
#[derive(Serialize, ToSchema)]
pub struct Property {
    property: String,
    #[schema(nullable = false)]
    private: Option<bool>,
    #[schema(nullable = false)]
    values: Option<Vec<Value>>,
}

#[derive(Serialize, ToSchema)]
pub struct Properties {
    resource_properties: Vec<Property>,
    #[schema(nullable = false)]
    resource_properties_links: Option<Vec<PageLink>>,
}

#[derive(Serialize, ToSchema)]
pub struct PropertyShown {
    property: String,
    private: bool,
    values: Vec<Value>,
    resource_type: String,
}

#[derive(Serialize, ToSchema)]
pub struct OneProperty {
    resource_property: PropertyShown,
}

/// A maintenance window.
#[derive(Serialize, ToSchema)]
pub struct Maintenance {
    id: Uuid,
    hosts: Vec<Uuid>,
    start_date: String,
    end_date: String,
    heal: bool,
    reason: Option<String>,
    created_at: String,
}

/// A window made, and what it did to each reservation it hit.
#[derive(Serialize, ToSchema)]
pub struct MaintenanceMade {
    maintenance: Maintenance,
    leases: Vec<Healed>,
}

#[derive(Serialize, ToSchema)]
pub struct MaintenanceWindows {
    maintenance: Vec<Maintenance>,
}
