//! Placement's request and response bodies. The handlers check a request
//! with the JSON schema of [`super::schemas`] (per microversion), whose
//! wording Placement's clients and conformance tests expect, then read it
//! into its type here, which also describes it in the OpenAPI document.
//! Answers are built per microversion; the types here describe the latest
//! microversion, with the fields that depend on it optional, and deny no
//! unknown field, so that what every version sends and answers matches.
//! `make fuzz` checks the answers against them.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize};
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

/// `POST /resource_providers`. The uuids are read as text, which the
/// handler parses (its refusal words what is wrong with one).
#[derive(Deserialize, ToSchema)]
pub struct NewProvider {
    #[schema(max_length = 200)]
    pub name: String,
    #[schema(nullable = false, format = Uuid)]
    pub uuid: Option<String>,
    /// 1.14 on.
    #[schema(format = Uuid)]
    pub parent_provider_uuid: Option<String>,
}

/// `PUT /resource_providers/{uuid}`.
#[derive(Deserialize, ToSchema)]
pub struct ProviderChange {
    #[schema(max_length = 200)]
    pub name: String,
    /// 1.14 on; re-parenting from 1.37. Null un-parents; absent leaves it.
    #[serde(default, deserialize_with = "given")]
    #[schema(format = Uuid)]
    pub parent_provider_uuid: Option<Option<String>>,
}

/// A field that may be given as null (`Some(None)`), unlike one absent (`None`).
fn given<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
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
#[derive(Debug, Deserialize, ToSchema)]
pub struct InventorySizes {
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    pub total: i64,
    #[schema(nullable = false, minimum = 0, maximum = 2_147_483_647)]
    pub reserved: Option<i64>,
    #[schema(nullable = false, minimum = 1, maximum = 2_147_483_647)]
    pub min_unit: Option<i64>,
    #[schema(nullable = false, minimum = 1, maximum = 2_147_483_647)]
    pub max_unit: Option<i64>,
    #[schema(nullable = false, minimum = 1, maximum = 2_147_483_647)]
    pub step_size: Option<i64>,
    #[schema(nullable = false, maximum = 3.40282e38)]
    pub allocation_ratio: Option<f64>,
}

impl InventorySizes {
    /// The inventory, Placement's defaults where a size is left out.
    pub fn inventory(&self) -> berth_core::Inventory {
        berth_core::Inventory {
            total: self.total,
            reserved: self.reserved.unwrap_or(0),
            min_unit: self.min_unit.unwrap_or(1),
            max_unit: self.max_unit.unwrap_or(berth_core::inventory::MAX_AMOUNT),
            step_size: self.step_size.unwrap_or(1),
            allocation_ratio: self.allocation_ratio.unwrap_or(1.0),
        }
    }
}

/// An inventory as a request gives it, with its provider's generation
/// where one inventory is written alone.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InventoryRecord {
    #[schema(nullable = false)]
    pub resource_provider_generation: Option<i64>,
    #[serde(flatten)]
    pub sizes: InventorySizes,
}

/// `POST /resource_providers/{uuid}/inventories`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct NewInventory {
    #[schema(pattern = "^[A-Z0-9_]+$")]
    pub resource_class: String,
    #[serde(flatten)]
    pub sizes: InventorySizes,
}

/// `PUT /resource_providers/{uuid}/inventories`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InventoriesChange {
    pub resource_provider_generation: i64,
    pub inventories: BTreeMap<String, InventoryRecord>,
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
#[derive(Deserialize, ToSchema)]
pub struct ClassName {
    #[schema(pattern = "^CUSTOM_[A-Z0-9_]+$", max_length = 255)]
    pub name: String,
}

#[derive(Serialize, ToSchema)]
pub struct Traits {
    traits: Vec<String>,
}

/// A provider's traits: the body of `PUT` and its answer.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ProviderTraits {
    pub resource_provider_generation: i64,
    pub traits: Vec<String>,
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

/// What a request claims on one provider, its classes in the request's
/// order (the answers keep it).
#[derive(Debug, Deserialize, ToSchema)]
pub struct Claim {
    /// Taken and ignored, as Placement does.
    #[schema(nullable = false, value_type = Option<i64>)]
    #[serde(default, rename = "generation")]
    pub _generation: Option<serde_json::Value>,
    #[schema(value_type = BTreeMap<String, i64>)]
    pub resources: IndexMap<String, i64>,
}

/// `PUT /allocations/{consumer_uuid}`, each consumer of `POST /allocations`
/// and of the reshaper (the latest microversion's form, which the schema
/// describes; before 1.12 `allocations` is a list of provider and
/// resources, before 1.8 the owner may be left out, before 1.38 the type),
/// its providers in the request's order.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AllocationsChange {
    #[schema(value_type = BTreeMap<String, Claim>)]
    pub allocations: IndexMap<String, Claim>,
    #[schema(required = true, nullable = false, min_length = 1, max_length = 255)]
    pub project_id: Option<String>,
    #[schema(required = true, nullable = false, min_length = 1, max_length = 255)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub consumer_generation: Option<i64>,
    /// Which provider each request group landed on (1.34 on): taken and
    /// ignored, as Placement keeps nothing of it.
    #[schema(nullable = false, value_type = Option<BTreeMap<String, Vec<Uuid>>>)]
    #[serde(default, rename = "mappings")]
    pub _mappings: Option<serde_json::Value>,
    #[schema(required = true, nullable = false, pattern = "^[A-Z0-9_]+$", min_length = 1, max_length = 255)]
    pub consumer_type: Option<String>,
}

/// `POST /allocations`: consumers by uuid, in the request's order.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(value_type = BTreeMap<String, AllocationsChange>)]
pub struct ManyAllocations(pub IndexMap<String, AllocationsChange>);

/// `POST /reshaper`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct Reshape {
    pub inventories: BTreeMap<String, InventoriesChange>,
    #[schema(value_type = BTreeMap<String, AllocationsChange>)]
    pub allocations: IndexMap<String, AllocationsChange>,
}

// ---- allocation candidates

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::examples;
    use crate::placement::microversion::MAX;
    use crate::placement::{schema, schemas};
    use proptest::test_runner::{Config, TestRunner};
    use serde_json::Value;

    /// A route whose handler reads its body as a type here, after checking
    /// it with a JSON schema (the latest microversion's).
    struct Reader {
        method: &'static str,
        path: &'static str,
        name: String,
        check: Value,
        parse: fn(&[u8], &Value) -> Result<(), crate::error::ApiError>,
    }

    fn reader<T: serde::de::DeserializeOwned + ToSchema>(
        method: &'static str,
        path: &'static str,
        check: Value,
    ) -> Reader {
        let parse = |bytes: &[u8], check: &Value| super::super::http::body::<T>(bytes, check).map(drop);
        Reader { method, path, name: T::name().into_owned(), check, parse }
    }

    fn readers() -> Vec<Reader> {
        let rp = "/placement/resource_providers/{uuid}";
        vec![
            reader::<NewProvider>("post", "/placement/resource_providers", schemas::create_provider(MAX)),
            reader::<ProviderChange>("put", rp, schemas::update_provider(MAX)),
            reader::<NewInventory>(
                "post",
                "/placement/resource_providers/{uuid}/inventories",
                schemas::create_inventory(),
            ),
            reader::<InventoriesChange>(
                "put",
                "/placement/resource_providers/{uuid}/inventories",
                schemas::replace_inventories(),
            ),
            reader::<InventoryRecord>(
                "put",
                "/placement/resource_providers/{uuid}/inventories/{resource_class}",
                schemas::update_inventory(),
            ),
            reader::<ClassName>("post", "/placement/resource_classes", schemas::resource_class()),
            reader::<ClassName>("put", "/placement/resource_classes/{name}", schemas::resource_class()),
            reader::<ProviderTraits>("put", "/placement/resource_providers/{uuid}/traits", schemas::provider_traits()),
            reader::<AllocationsChange>(
                "put",
                "/placement/allocations/{consumer_uuid}",
                schemas::PUT_ALLOCATIONS.get(MAX).clone(),
            ),
            reader::<ManyAllocations>("post", "/placement/allocations", schemas::POST_ALLOCATIONS.get(MAX).clone()),
            reader::<Reshape>("post", "/placement/reshaper", schemas::reshaper(MAX)),
        ]
    }

    /// Bodies whose handlers read them by hand (the shape depends on the
    /// microversion): described by a type, checked by their JSON schema.
    const BY_HAND: &[(&str, &str)] = &[("put", "/placement/resource_providers/{uuid}/aggregates")];

    /// The document describes each Placement body as the type its handler
    /// reads it into.
    #[test]
    fn each_route_describes_the_type_it_reads() {
        let doc = serde_json::to_value(crate::openapi::document()).unwrap();
        let readers = readers();
        for (path, item) in doc["paths"].as_object().unwrap().iter().filter(|(p, _)| p.starts_with("/placement/")) {
            for (method, _) in item.as_object().unwrap() {
                let Some(schema) = examples::request_schema(&doc, method, path) else { continue };
                if BY_HAND.contains(&(method.as_str(), path.as_str())) {
                    continue;
                }
                let r = readers.iter().find(|r| (r.method, r.path) == (method.as_str(), path.as_str()));
                let r = r.unwrap_or_else(|| panic!("{method} {path} takes a body no Placement type reads"));
                assert_eq!(examples::ref_name(schema), Some(r.name.as_str()), "{method} {path}");
            }
        }
    }

    /// Every body the document describes that the JSON schema lets through,
    /// the type reads (else its caller would get serde's words, not
    /// Placement's); and the two agree often enough for that to mean something.
    #[test]
    fn each_type_reads_every_described_body_its_schema_lets_through() {
        let doc = serde_json::to_value(crate::openapi::document()).unwrap();
        for r in readers() {
            let described = examples::request_schema(&doc, r.method, r.path).unwrap();
            let mut runner = TestRunner::new(Config { cases: 300, failure_persistence: None, ..Config::default() });
            let passed = std::cell::Cell::new(0);
            let outcome = runner.run(&examples::values(&doc, described), |body| {
                if schema::validate(&body, &r.check).is_ok() {
                    passed.set(passed.get() + 1);
                    let read = (r.parse)(body.to_string().as_bytes(), &r.check);
                    proptest::prop_assert!(read.is_ok(), "{}", read.unwrap_err().detail);
                }
                Ok(())
            });
            if let Err(e) = outcome {
                panic!("{} {} ({}): {e}", r.method, r.path, r.name);
            }
            assert!(
                passed.get() > 0,
                "{} {}: only {} of 300 described bodies pass the schema",
                r.method,
                r.path,
                passed.get()
            );
        }
    }
}
