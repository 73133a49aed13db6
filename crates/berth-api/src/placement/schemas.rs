//! The JSON schemas of Placement's request bodies and query strings, per
//! microversion, as its API reference defines them.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::microversion::Version;

pub const MAX_INT: i64 = 2_147_483_647;
/// The largest single-precision float, the ceiling of an allocation ratio.
pub const MAX_FLOAT: f64 = 3.40282e38;
pub const UUID_KEY: &str = "^[0-9a-fA-F-]{36}$";
pub const CLASS_PATTERN: &str = "^[A-Z0-9_]+$";
pub const CUSTOM_PATTERN: &str = "^CUSTOM_[A-Z0-9_]+$";
pub const CONSUMER_TYPE_PATTERN: &str = "^[A-Z0-9_]+$";
pub const CONSUMER_TYPE_QUERY_PATTERN: &str = "^[A-Z0-9_]+$|^all|^unknown$";
pub const GROUP_SUFFIX: &str = "[a-zA-Z0-9_-]{1,64}";

/// A schema built once per microversion and kept, for the routes called
/// at claim rates: building the PUT schema afresh for each claim was some
/// 3 % of its CPU. Microversions are bounded (negotiation refuses others),
/// so is what is kept.
pub struct PerVersion {
    build: fn(Version) -> Value,
    built: Mutex<BTreeMap<Version, &'static Value>>,
}

impl PerVersion {
    pub const fn new(build: fn(Version) -> Value) -> PerVersion {
        PerVersion { build, built: Mutex::new(BTreeMap::new()) }
    }

    pub fn get(&self, v: Version) -> &'static Value {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        built.entry(v).or_insert_with(|| Box::leak(Box::new((self.build)(v))))
    }
}

/// [`put_allocations`], kept per microversion.
pub static PUT_ALLOCATIONS: PerVersion = PerVersion::new(put_allocations);
/// [`allocations_list`], kept per microversion.
pub static ALLOCATIONS_LIST: PerVersion = PerVersion::new(allocations_list);
/// [`post_allocations`] of at least one consumer, kept per microversion.
pub static POST_ALLOCATIONS: PerVersion = PerVersion::new(|v| post_allocations(v, 1));

fn uuid() -> Value {
    json!({"type": "string", "format": "uuid"})
}

fn amount(minimum: i64) -> Value {
    json!({"type": "integer", "minimum": minimum, "maximum": MAX_INT})
}

// ---- resource providers

pub fn create_provider(v: Version) -> Value {
    let mut s = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 200}, "uuid": uuid()},
        "required": ["name"],
        "additionalProperties": false
    });
    if v.nested_providers() {
        s["properties"]["parent_provider_uuid"] = json!({"anyOf": [uuid(), {"type": "null"}]});
    }
    s
}

pub fn update_provider(v: Version) -> Value {
    let mut s = create_provider(v);
    s["properties"].as_object_mut().expect("object").remove("uuid");
    s
}

pub fn list_providers(v: Version) -> Value {
    let mut props = json!({"name": {"type": "string"}, "uuid": uuid()});
    if v.member_of() {
        props["member_of"] = json!({"type": "string"});
    }
    if v.resources_filter() {
        props["resources"] = json!({"type": "string"});
    }
    if v.nested_providers() {
        props["in_tree"] = uuid();
    }
    if v.providers_required() {
        props["required"] = json!({"type": "string"});
    }
    json!({"type": "object", "properties": props, "additionalProperties": false})
}

// ---- inventories

fn inventory_record() -> Value {
    json!({
        "type": "object",
        "properties": {
            "resource_provider_generation": {"type": "integer"},
            "total": amount(1),
            "reserved": amount(0),
            "min_unit": amount(1),
            "max_unit": amount(1),
            "step_size": amount(1),
            "allocation_ratio": {"type": "number", "maximum": MAX_FLOAT}
        },
        "required": ["total"],
        "additionalProperties": false
    })
}

/// `PUT /resource_providers/{uuid}/inventories/{class}`.
pub fn update_inventory() -> Value {
    let mut s = inventory_record();
    s["required"] = json!(["total", "resource_provider_generation"]);
    s
}

/// `POST /resource_providers/{uuid}/inventories`.
pub fn create_inventory() -> Value {
    let mut s = inventory_record();
    s["properties"]["resource_class"] = json!({"type": "string", "pattern": CLASS_PATTERN});
    s["required"] = json!(["total", "resource_class"]);
    s
}

/// `PUT /resource_providers/{uuid}/inventories`.
pub fn replace_inventories() -> Value {
    json!({
        "type": "object",
        "properties": {
            "resource_provider_generation": {"type": "integer"},
            "inventories": {"type": "object", "patternProperties": {CLASS_PATTERN: inventory_record()}}
        },
        "required": ["resource_provider_generation", "inventories"],
        "additionalProperties": false
    })
}

// ---- resource classes and traits

pub fn resource_class() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": 255}},
        "required": ["name"],
        "additionalProperties": false
    })
}

pub fn custom_trait() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": CUSTOM_PATTERN})
}

pub fn provider_traits() -> Value {
    json!({
        "type": "object",
        "properties": {
            "traits": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 255}},
            "resource_provider_generation": {"type": "integer"}
        },
        "required": ["traits", "resource_provider_generation"],
        "additionalProperties": false
    })
}

pub fn list_traits() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
        "additionalProperties": false
    })
}

// ---- aggregates

fn aggregate_list() -> Value {
    json!({"type": "array", "items": uuid(), "uniqueItems": true})
}

pub fn aggregates(v: Version) -> Value {
    if v.aggregates_generation() {
        json!({
            "type": "object",
            "properties": {"aggregates": aggregate_list(), "resource_provider_generation": {"type": "integer"}},
            "required": ["aggregates", "resource_provider_generation"],
            "additionalProperties": false
        })
    } else {
        aggregate_list()
    }
}

// ---- allocations

fn owner() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 255})
}

fn resources() -> Value {
    json!({
        "type": "object",
        "minProperties": 1,
        "patternProperties": {CLASS_PATTERN: {"type": "integer", "minimum": 1}},
        "additionalProperties": false
    })
}

/// `PUT /allocations/{consumer}` before 1.12: a list of provider/resources pairs.
pub fn allocations_list(v: Version) -> Value {
    let mut s = json!({
        "type": "object",
        "properties": {
            "allocations": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "resource_provider": {
                            "type": "object",
                            "properties": {"uuid": uuid()},
                            "additionalProperties": false,
                            "required": ["uuid"]
                        },
                        "resources": resources()
                    },
                    "required": ["resource_provider", "resources"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["allocations"],
        "additionalProperties": false
    });
    if v.allocation_owner_required() {
        s["properties"]["project_id"] = owner();
        s["properties"]["user_id"] = owner();
        s["required"] = json!(["allocations", "project_id", "user_id"]);
    }
    s
}

/// One consumer's allocations keyed by provider (1.12 on), as PUT takes
/// them and as each entry of POST and of the reshaper does.
pub fn consumer_allocations(v: Version, may_be_empty: bool) -> Value {
    let mut s = json!({
        "type": "object",
        "properties": {
            "allocations": {
                "type": "object",
                "minProperties": if may_be_empty { 0 } else { 1 },
                "patternProperties": {
                    UUID_KEY: {
                        "type": "object",
                        "properties": {"generation": {"type": "integer"}, "resources": resources()},
                        "required": ["resources"],
                        "additionalProperties": false
                    }
                },
                "additionalProperties": false
            },
            "project_id": owner(),
            "user_id": owner()
        },
        "required": ["allocations", "project_id", "user_id"],
        "additionalProperties": false
    });
    let mut required = vec!["allocations", "project_id", "user_id"];
    if v.consumer_generations() {
        s["properties"]["consumer_generation"] = json!({"type": ["integer", "null"]});
        required.push("consumer_generation");
    }
    if v.mappings() {
        s["properties"]["mappings"] = json!({
            "type": "object",
            "minProperties": 1,
            "patternProperties": {GROUP_SUFFIX: {"type": "array", "minItems": 1, "items": uuid()}}
        });
    }
    if v.consumer_types() {
        s["properties"]["consumer_type"] =
            json!({"type": "string", "pattern": CONSUMER_TYPE_PATTERN, "minLength": 1, "maxLength": 255});
        required.push("consumer_type");
    }
    s["required"] = json!(required);
    s
}

/// `PUT /allocations/{consumer}` from 1.12 on; empty allocations from 1.28.
pub fn put_allocations(v: Version) -> Value {
    consumer_allocations(v, v.consumer_generations())
}

/// `POST /allocations`: consumers keyed by UUID.
pub fn post_allocations(v: Version, min_consumers: u64) -> Value {
    json!({
        "type": "object",
        "minProperties": min_consumers,
        "additionalProperties": false,
        "patternProperties": {UUID_KEY: consumer_allocations(v, true)}
    })
}

/// `POST /reshaper`.
pub fn reshaper(v: Version) -> Value {
    let inventories = replace_inventories();
    json!({
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {UUID_KEY: inventories},
                "minProperties": 1,
                "additionalProperties": false
            },
            "allocations": post_allocations(v, 0)
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": false
    })
}

// ---- allocation candidates

/// The keys that form request groups, with their optional suffix.
pub fn group_key_pattern(v: Version) -> String {
    let suffix = if v.string_suffixes() { GROUP_SUFFIX } else { "[1-9][0-9]*" };
    format!("^(resources|required|member_of|in_tree)({suffix})?$")
}

pub fn candidates(v: Version) -> Value {
    let limit = json!({"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1, "minLength": 1});
    if !v.granular_groups() {
        let mut props = json!({"resources": {"type": "string"}});
        if v.candidates_limit() {
            props["limit"] = limit;
        }
        if v.candidates_required() {
            props["required"] = json!({"type": "string"});
        }
        if v.candidates_member_of() {
            props["member_of"] = json!({"type": "string"});
        }
        return json!({"type": "object", "properties": props, "required": ["resources"], "additionalProperties": false});
    }
    let suffix = if v.string_suffixes() { GROUP_SUFFIX } else { "[1-9][0-9]*" };
    let mut patterns = serde_json::Map::new();
    let mut kinds = vec!["resources", "required", "member_of"];
    if v.candidates_in_tree() {
        kinds.push("in_tree");
    }
    for kind in kinds {
        patterns.insert(format!("^{kind}({suffix})?$"), json!({"type": "string"}));
    }
    let mut props = json!({"limit": limit, "group_policy": {"type": "string", "enum": ["none", "isolate"]}});
    if v.root_required() {
        props["root_required"] = json!({"type": "string"});
    }
    if v.same_subtree() {
        props["same_subtree"] = json!({"type": "string"});
    }
    json!({"type": "object", "properties": props, "patternProperties": patterns, "additionalProperties": false})
}

// ---- usages

pub fn usages(v: Version) -> Value {
    let mut s = json!({
        "type": "object",
        "properties": {"project_id": owner(), "user_id": owner()},
        "required": ["project_id"],
        "additionalProperties": false
    });
    if v.consumer_types() {
        s["properties"]["consumer_type"] =
            json!({"type": "string", "pattern": CONSUMER_TYPE_QUERY_PATTERN, "minLength": 1, "maxLength": 255});
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::microversion::MAX;
    use super::super::schema::validate;
    use super::*;

    #[test]
    fn reshaper_takes_consumer_type_at_138() {
        let body = json!({
            "inventories": {"4e05a85b-e8a6-4b3a-82c1-5f6ad3f71d55": {"resource_provider_generation": 0, "inventories": {}}},
            "allocations": {"a6ace019-f230-4dcc-8a76-36d27b9c2257": {
                "allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": null
            }}
        });
        let e = validate(&body, &reshaper(MAX)).unwrap_err();
        assert_eq!(e.message, "'consumer_type' is a required property");
    }
}
