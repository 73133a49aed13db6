//! The plugin protocol as JSON Schemas: `schema/protocol.json`, one document
//! with the envelope, each action's payload and each answer, served at
//! `/v1/plugins/schema` and read here to check what a plugin answers.
//!
//! The check is typed: serde reads an answer into a [`ResourceRequest`],
//! after the answer's keys are checked against the schema's branch for its
//! `kind` (so a misspelt key is an error, not a setting silently ignored),
//! and the bounds serde cannot say (at least one slot, `min <= max`) are
//! checked beside. The unit tests keep the schema and the types in step.
//! A general JSON Schema validator was not worth its build for three small
//! shapes, and the answers' only other reader, `berth plugin check`, calls
//! this same function: a plugin it passes is one Berth accepts.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::plugin::ResourceRequest;

/// The schema document, as kept in the repository.
pub const SCHEMA_JSON: &str = include_str!("../schema/protocol.json");

static SCHEMA: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(SCHEMA_JSON).expect("schema/protocol.json is JSON (its unit test reads it)"));

/// The schema document.
pub fn schema() -> &'static Value {
    &SCHEMA
}

/// The actions Berth sends an external plugin.
pub const ACTIONS: [&str; 6] = ["validate", "on_start", "before_end", "on_end", "on_update", "on_heal"];

/// Each hook action with the `event_type` its payload carries, in a lease's order.
pub const HOOKS: [(&str, &str); 4] = [
    ("on_start", "start_lease"),
    ("on_update", "update_lease"),
    ("before_end", "before_end_lease"),
    ("on_end", "end_lease"),
];

/// The optional action `berth plugin check` sends to see a plugin's state;
/// Berth itself never sends it.
pub const STATE: &str = "state";

/// The `validate_answer` branches, by `kind`.
fn branches() -> impl Iterator<Item = (&'static str, &'static Map<String, Value>)> {
    SCHEMA["$defs"]["validate_answer"]["oneOf"].as_array().into_iter().flatten().filter_map(|b| {
        let kind = b["properties"]["kind"]["const"].as_str()?;
        Some((kind, b.as_object()?))
    })
}

fn names<'a>(keys: impl IntoIterator<Item = &'a str>) -> String {
    keys.into_iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")
}

/// A validate answer read as the resource request it must be; the error
/// says what is wrong with it, in words a plugin's author can act on.
pub fn read_validate_answer(answer: &Value) -> Result<ResourceRequest, String> {
    let kinds = || names(branches().map(|(k, _)| k));
    let Some(obj) = answer.as_object() else {
        return Err(format!("the answer is not a JSON object (one with \"kind\": {})", kinds()));
    };
    let kind = match obj.get("kind") {
        Some(Value::String(k)) => k.as_str(),
        Some(other) => return Err(format!("\"kind\" must be one of {}, not {other}", kinds())),
        None => return Err(format!("the answer has no \"kind\" (one of {})", kinds())),
    };
    let Some((_, branch)) = branches().find(|(k, _)| *k == kind) else {
        return Err(format!("\"kind\" {kind:?} is none of {}", kinds()));
    };
    let properties = branch.get("properties").and_then(Value::as_object);
    let takes = |k: &str| properties.is_some_and(|p| p.contains_key(k));
    let unknown: Vec<&str> = obj.keys().map(String::as_str).filter(|k| !takes(k)).collect();
    if !unknown.is_empty() {
        let known = properties.into_iter().flat_map(|p| p.keys().map(String::as_str));
        return Err(format!("a {kind:?} answer has no key {}; it takes {}", names(unknown), names(known)));
    }
    let required = branch.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    let missing: Vec<&str> = required.filter(|k| !obj.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(format!("a {kind:?} answer needs {}", names(missing)));
    }
    let request: ResourceRequest =
        serde_json::from_value(answer.clone()).map_err(|e| format!("a {kind:?} answer: {e}"))?;
    check_bounds(&request).map_err(|e| format!("a {kind:?} answer: {e}"))?;
    Ok(request)
}

fn query(name: &str, v: &Option<Value>) -> Result<(), String> {
    match v {
        None | Some(Value::Null | Value::Array(_) | Value::String(_)) => Ok(()),
        Some(other) => {
            Err(format!("{name} must be a property query (a JSON list, a string holding one, or null), not {other}"))
        }
    }
}

fn check_bounds(request: &ResourceRequest) -> Result<(), String> {
    match request {
        ResourceRequest::Nothing => Ok(()),
        ResourceRequest::Slots { amount, resources, resource_properties, .. } => {
            if *amount == 0 {
                return Err("amount must be at least 1".into());
            }
            if resources.is_empty() {
                return Err("resources must name at least one resource class".into());
            }
            for (class, n) in resources {
                let well_named = !class.is_empty()
                    && class.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                if !well_named {
                    return Err(format!("resource class {class:?} is not a Placement class name (A-Z, 0-9, _)"));
                }
                if *n < 1 {
                    return Err(format!("resources.{class} must be at least 1, not {n}"));
                }
            }
            query("resource_properties", resource_properties)
        }
        ResourceRequest::Hosts { min, max, hypervisor_properties, resource_properties } => {
            if *min == 0 {
                return Err("min must be at least 1".into());
            }
            if max < min {
                return Err(format!("max ({max}) must not be below min ({min})"));
            }
            query("hypervisor_properties", hypervisor_properties)?;
            query("resource_properties", resource_properties)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_names_every_action_and_its_shapes() {
        let s = schema();
        for action in ACTIONS.iter().chain([&STATE]) {
            let a = &s["x-actions"][action];
            for part in ["payload", "answer"] {
                let reference = a[part].as_str().unwrap_or_else(|| panic!("{action}.{part}"));
                let name = reference.strip_prefix("#/$defs/").unwrap();
                assert!(s["$defs"][name].is_object(), "{action}.{part} refers to {reference}");
            }
        }
        let listed: Vec<&str> = s["$defs"]["envelope"]["properties"]["action"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(listed, ACTIONS.iter().chain([&STATE]).copied().collect::<Vec<_>>());
        assert_eq!(branches().map(|(k, _)| k).collect::<Vec<_>>(), ["nothing", "slots", "hosts"]);
    }

    /// The schema and `ResourceRequest` take the same keys: each branch's
    /// example is read; without any required key it is refused, without any
    /// other key read still; an unknown key is refused; what serde writes
    /// of each kind has exactly the schema's keys.
    #[test]
    fn the_schema_and_the_types_agree() {
        for (kind, branch) in branches() {
            let example = &branch["examples"][0];
            let request = read_validate_answer(example).unwrap_or_else(|e| panic!("{kind}: {e}"));
            let written = serde_json::to_value(&request).unwrap();
            let mut written_keys: Vec<&String> = written.as_object().unwrap().keys().collect();
            let mut schema_keys: Vec<&String> = branch["properties"].as_object().unwrap().keys().collect();
            written_keys.sort();
            schema_keys.sort();
            assert_eq!(written_keys, schema_keys, "{kind}");
            let required: Vec<&str> = branch["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            for key in example.as_object().unwrap().keys() {
                let mut without = example.clone();
                without.as_object_mut().unwrap().remove(key);
                let read = read_validate_answer(&without);
                assert_eq!(read.is_err(), required.contains(&key.as_str()), "{kind} without {key}: {read:?}");
            }
            let mut extra = example.clone();
            extra["afinity"] = json!(true);
            let e = read_validate_answer(&extra).unwrap_err();
            assert!(e.contains("no key \"afinity\""), "{e}");
        }
    }

    #[test]
    fn malformed_answers_say_what_is_wrong() {
        let cases = [
            (json!(null), "not a JSON object"),
            (json!("nothing"), "not a JSON object"),
            (json!({}), "has no \"kind\""),
            (json!({"kind": 3}), "\"kind\" must be one of"),
            (json!({"kind": "host"}), "\"kind\" \"host\" is none of \"nothing\", \"slots\", \"hosts\""),
            (json!({"kind": "slots", "resources": {"VCPU": 1}}), "needs \"amount\""),
            (json!({"kind": "slots", "amount": "2", "resources": {"VCPU": 1}}), "invalid type: string \"2\""),
            (json!({"kind": "slots", "amount": 0, "resources": {"VCPU": 1}}), "amount must be at least 1"),
            (json!({"kind": "slots", "amount": 1, "resources": {}}), "at least one resource class"),
            (json!({"kind": "slots", "amount": 1, "resources": {"vcpu": 1}}), "not a Placement class name"),
            (json!({"kind": "slots", "amount": 1, "resources": {"VCPU": 0}}), "resources.VCPU must be at least 1"),
            (json!({"kind": "hosts", "min": 2, "max": 1}), "max (1) must not be below min (2)"),
            (json!({"kind": "hosts", "min": 0, "max": 1}), "min must be at least 1"),
            (json!({"kind": "hosts", "min": 1, "max": 1, "hypervisor_properties": 4}), "property query"),
            (json!({"kind": "hosts", "min": -1, "max": 1}), "invalid value: integer `-1`"),
        ];
        for (answer, want) in cases {
            let e = read_validate_answer(&answer).unwrap_err();
            assert!(e.contains(want), "{answer}: {e}");
        }
        let ok = read_validate_answer(
            &json!({"kind": "hosts", "min": 1, "max": 3, "resource_properties": "[\"==\", \"$gpu\", \"true\"]"}),
        );
        assert!(ok.is_ok(), "{ok:?}");
    }
}
