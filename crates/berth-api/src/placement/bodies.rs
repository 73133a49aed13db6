//! Placement's request and response bodies, as schemas for the OpenAPI
//! document. The handlers check requests with the JSON schemas of
//! [`super::schemas`] (per microversion) and build answers per
//! microversion; these describe the latest microversion, with the fields
//! that depend on it optional, and deny no unknown field, so that what
//! every version sends and answers matches. `make fuzz` checks the answers
//! against them.
#![allow(dead_code)] // schemas only: no handler builds these

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Serialize, ToSchema)]
pub struct Link {
    rel: String,
    href: String,
}

// ---- the version document

#[derive(Serialize, ToSchema)]
pub struct Version {
    id: String,
    min_version: String,
    max_version: String,
    status: String,
    links: Vec<Link>,
}

#[derive(Serialize, ToSchema)]
pub struct Versions {
    versions: Vec<Version>,
}

// ---- resource providers

/// `POST /resource_providers`.
#[derive(Serialize, ToSchema)]
pub struct NewProvider {
    #[schema(max_length = 200)]
    name: String,
    #[schema(nullable = false)]
    uuid: Option<Uuid>,
    /// 1.14 on.
    parent_provider_uuid: Option<Uuid>,
}

/// `PUT /resource_providers/{uuid}`.
#[derive(Serialize, ToSchema)]
pub struct ProviderChange {
    #[schema(max_length = 200)]
    name: String,
    /// 1.14 on; re-parenting from 1.37.
    parent_provider_uuid: Option<Uuid>,
}

#[derive(Serialize, ToSchema)]
pub struct Provider {
    uuid: Uuid,
    name: String,
    generation: i64,
    links: Vec<Link>,
    /// 1.14 on.
    parent_provider_uuid: Option<Uuid>,
    /// 1.14 on.
    root_provider_uuid: Option<Uuid>,
}

#[derive(Serialize, ToSchema)]
pub struct Providers {
    resource_providers: Vec<Provider>,
}

// ---- inventories

/// One inventory as a provider's list shows it.
#[derive(Serialize, ToSchema)]
pub struct Inventory {
    total: i64,
    reserved: i64,
    min_unit: i64,
    max_unit: i64,
    step_size: i64,
    allocation_ratio: f64,
}

/// One inventory with its provider's generation.
#[derive(Serialize, ToSchema)]
pub struct InventoryAt {
    resource_provider_generation: i64,
    #[serde(flatten)]
    inventory: Inventory,
}

#[derive(Serialize, ToSchema)]
pub struct Inventories {
    resource_provider_generation: i64,
    inventories: BTreeMap<String, Inventory>,
}

/// An inventory's sizes as a request gives them; what is left out takes
/// Placement's default.
#[derive(Serialize, ToSchema)]
pub struct InventorySizes {
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    total: i64,
    #[schema(nullable = false, minimum = 0, maximum = 2_147_483_647)]
    reserved: Option<i64>,
    #[schema(nullable = false, minimum = 1, maximum = 2_147_483_647)]
    min_unit: Option<i64>,
    #[schema(nullable = false, minimum = 1, maximum = 2_147_483_647)]
    max_unit: Option<i64>,
    #[schema(nullable = false, minimum = 1, maximum = 2_147_483_647)]
    step_size: Option<i64>,
    #[schema(nullable = false, maximum = 3.40282e38)]
    allocation_ratio: Option<f64>,
}

/// An inventory as a request gives it, with its provider's generation
/// where one inventory is written alone.
#[derive(Serialize, ToSchema)]
pub struct InventoryRecord {
    #[schema(nullable = false)]
    resource_provider_generation: Option<i64>,
    #[serde(flatten)]
    sizes: InventorySizes,
}

/// `POST /resource_providers/{uuid}/inventories`.
#[derive(Serialize, ToSchema)]
pub struct NewInventory {
    #[schema(pattern = "^[A-Z0-9_]+$")]
    resource_class: String,
    #[serde(flatten)]
    sizes: InventorySizes,
}

/// `PUT /resource_providers/{uuid}/inventories`.
#[derive(Serialize, ToSchema)]
pub struct InventoriesChange {
    resource_provider_generation: i64,
    inventories: BTreeMap<String, InventoryRecord>,
}

// ---- resource classes and traits

#[derive(Serialize, ToSchema)]
pub struct ResourceClass {
    name: String,
    links: Vec<Link>,
}

#[derive(Serialize, ToSchema)]
pub struct ResourceClasses {
    resource_classes: Vec<ResourceClass>,
}

/// `POST /resource_classes`, and `PUT /resource_classes/{name}` before 1.7.
#[derive(Serialize, ToSchema)]
pub struct ClassName {
    #[schema(pattern = "^CUSTOM_[A-Z0-9_]+$", max_length = 255)]
    name: String,
}

#[derive(Serialize, ToSchema)]
pub struct Traits {
    traits: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ProviderTraits {
    resource_provider_generation: i64,
    traits: Vec<String>,
}

// ---- aggregates

/// A provider's aggregates (the generation from 1.19; before it a request
/// body is the bare list).
#[derive(Serialize, ToSchema)]
pub struct Aggregates {
    aggregates: Vec<Uuid>,
    #[schema(nullable = false)]
    resource_provider_generation: Option<i64>,
}

// ---- usages

#[derive(Serialize, ToSchema)]
pub struct ProviderUsages {
    resource_provider_generation: i64,
    usages: BTreeMap<String, i64>,
}

/// By resource class; from 1.38 by consumer type, each group with its
/// classes and a `consumer_count`.
#[derive(Serialize, ToSchema)]
pub struct Usages {
    usages: BTreeMap<String, serde_json::Value>,
}

// ---- allocations

#[derive(Serialize, ToSchema)]
pub struct ProviderResources {
    /// The provider's generation.
    #[schema(nullable = false)]
    generation: Option<i64>,
    resources: BTreeMap<String, i64>,
}

/// A consumer's allocations, keyed by provider (the owner from 1.12, its
/// generation from 1.28, its type from 1.38).
#[derive(Serialize, ToSchema)]
pub struct ConsumerAllocations {
    allocations: BTreeMap<String, ProviderResources>,
    #[schema(nullable = false)]
    project_id: Option<String>,
    #[schema(nullable = false)]
    user_id: Option<String>,
    consumer_generation: Option<i64>,
    #[schema(nullable = false)]
    consumer_type: Option<String>,
}

/// One consumer on a provider.
#[derive(Serialize, ToSchema)]
pub struct ConsumerResources {
    resources: BTreeMap<String, i64>,
    /// 1.28 on.
    consumer_generation: Option<i64>,
}

#[derive(Serialize, ToSchema)]
pub struct ProviderAllocations {
    resource_provider_generation: i64,
    allocations: BTreeMap<String, ConsumerResources>,
}

/// What a request claims on one provider.
#[derive(Serialize, ToSchema)]
pub struct Claim {
    #[schema(nullable = false)]
    generation: Option<i64>,
    resources: BTreeMap<String, i64>,
}

/// `PUT /allocations/{consumer_uuid}` (the latest microversion's form;
/// before 1.12 `allocations` is a list of provider and resources).
#[derive(Serialize, ToSchema)]
pub struct AllocationsChange {
    allocations: BTreeMap<String, Claim>,
    #[schema(min_length = 1, max_length = 255)]
    project_id: String,
    #[schema(min_length = 1, max_length = 255)]
    user_id: String,
    consumer_generation: Option<i64>,
    #[schema(nullable = false)]
    mappings: Option<BTreeMap<String, Vec<Uuid>>>,
    #[schema(pattern = "^[A-Z0-9_]+$", min_length = 1, max_length = 255)]
    consumer_type: String,
}

/// `POST /allocations`: consumers by uuid.
#[derive(Serialize, ToSchema)]
pub struct ManyAllocations(BTreeMap<String, AllocationsChange>);

/// `POST /reshaper`.
#[derive(Serialize, ToSchema)]
pub struct Reshape {
    inventories: BTreeMap<String, InventoriesChange>,
    allocations: BTreeMap<String, AllocationsChange>,
}

// ---- allocation candidates

#[derive(Serialize, ToSchema)]
pub struct CandidateResources {
    resources: BTreeMap<String, i64>,
}

/// One way to satisfy the request: allocations by provider (a list of
/// `{resource_provider, resources}` before 1.12) and, from 1.34, which
/// provider each request group landed on.
#[derive(Serialize, ToSchema)]
pub struct AllocationRequest {
    allocations: serde_json::Value,
    #[schema(nullable = false)]
    mappings: Option<BTreeMap<String, Vec<Uuid>>>,
}

#[derive(Serialize, ToSchema)]
pub struct Capacity {
    capacity: i64,
    used: i64,
}

#[derive(Serialize, ToSchema)]
pub struct ProviderSummary {
    resources: BTreeMap<String, Capacity>,
    /// 1.17 on.
    #[schema(nullable = false)]
    traits: Option<Vec<String>>,
    /// 1.29 on.
    parent_provider_uuid: Option<Uuid>,
    /// 1.29 on.
    root_provider_uuid: Option<Uuid>,
}

#[derive(Serialize, ToSchema)]
pub struct Candidates {
    allocation_requests: Vec<AllocationRequest>,
    provider_summaries: BTreeMap<String, ProviderSummary>,
}
