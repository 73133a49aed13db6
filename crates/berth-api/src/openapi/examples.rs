//! Bodies generated from the OpenAPI document, for the tests that feed a
//! route's parser what its description allows: if the two drift apart, a
//! body the document promises is refused (or a refusal goes unwritten).
//! It covers the schema keywords utoipa writes for Berth's types.

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use serde_json::{json, Map, Value};

/// The schema of the request body of `method` (`"post"`) on `path`, as a
/// `$ref` or inline; None if the operation takes no body.
pub fn request_schema<'d>(doc: &'d Value, method: &str, path: &str) -> Option<&'d Value> {
    doc["paths"][path][method]["requestBody"]["content"]["application/json"].get("schema")
}

/// The name of the component a `$ref` points at (also as the one
/// alternative to null of an optional body).
pub fn ref_name(schema: &Value) -> Option<&str> {
    if let Some(alternatives) = schema.get("oneOf").and_then(Value::as_array) {
        let mut named = alternatives.iter().filter_map(ref_name);
        return named.next().filter(|_| named.next().is_none());
    }
    schema.get("$ref")?.as_str()?.strip_prefix("#/components/schemas/")
}

/// A pattern without the anchors of its alternatives, which string
/// generation cannot read (what it generates matches whole anyway).
fn unanchored(pattern: &str) -> String {
    let each: Vec<&str> = pattern
        .split('|')
        .map(|p| p.strip_prefix('^').unwrap_or(p))
        .map(|p| p.strip_suffix('$').unwrap_or(p))
        .collect();
    each.join("|")
}

/// Values `schema` (within `doc`, for its `$ref`s) describes.
pub fn values(doc: &Value, schema: &Value) -> BoxedStrategy<Value> {
    strategy(doc, schema, 0)
}

fn strategy(doc: &Value, schema: &Value, depth: usize) -> BoxedStrategy<Value> {
    if let Some(name) = ref_name(schema) {
        return strategy(doc, &doc["components"]["schemas"][name], depth);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema.get(key).and_then(Value::as_array) {
            let each: Vec<_> = alternatives.iter().map(|s| strategy(doc, s, depth + 1)).collect();
            return Union::new(each).boxed();
        }
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        let each: Vec<_> = parts.iter().map(|s| strategy(doc, s, depth + 1)).collect();
        return each
            .prop_map(|parts| {
                let mut whole = Map::new();
                for p in parts {
                    if let Value::Object(o) = p {
                        whole.extend(o);
                    }
                }
                Value::Object(whole)
            })
            .boxed();
    }
    let types: Vec<String> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().filter_map(|t| t.as_str().map(String::from)).collect(),
        _ if schema.get("properties").is_some() => vec!["object".into()],
        _ => vec![],
    };
    if types.is_empty() {
        return any_value(depth);
    }
    let each: Vec<_> = types.iter().map(|t| of_type(doc, schema, t, depth)).collect();
    Union::new(each).boxed()
}

fn of_type(doc: &Value, schema: &Value, ty: &str, depth: usize) -> BoxedStrategy<Value> {
    let int = |k: &str| schema.get(k).and_then(Value::as_i64);
    match ty {
        "null" => Just(Value::Null).boxed(),
        "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
        "integer" => {
            let lo = int("minimum").unwrap_or(-1000);
            let hi = int("maximum").unwrap_or(lo.saturating_add(2000)).max(lo);
            (lo..=hi).prop_map(|n| json!(n)).boxed()
        }
        "number" => (-1000.0f64..1000.0).prop_map(|n| json!(n)).boxed(),
        "string" => string(schema),
        "array" => {
            let items = schema.get("items").cloned().unwrap_or(json!({}));
            let min = int("minItems").unwrap_or(0).max(0) as usize;
            let max = int("maxItems").map(|m| m as usize).unwrap_or(min + 3).max(min);
            prop::collection::vec(strategy(doc, &items, depth + 1), min..=max).prop_map(Value::Array).boxed()
        }
        "object" => object(doc, schema, depth),
        _ => any_value(depth),
    }
}

fn string(schema: &Value) -> BoxedStrategy<Value> {
    let len = |k: &str| schema.get(k).and_then(Value::as_u64).map(|n| n as usize);
    let (min, max) = (len("minLength").unwrap_or(0), len("maxLength").unwrap_or(24).min(24));
    if schema.get("format").and_then(Value::as_str) == Some("uuid") {
        return any::<u128>().prop_map(|n| json!(uuid::Uuid::from_u128(n).to_string())).boxed();
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        let re = proptest::string::string_regex(&unanchored(pattern)).expect("a pattern proptest reads");
        return re
            .prop_filter("within the lengths", move |s| (min..=max.max(min)).contains(&s.chars().count()))
            .prop_map(Value::String)
            .boxed();
    }
    proptest::string::string_regex(&format!("[a-zA-Z0-9 _:-]{{{min},{}}}", max.max(min)))
        .expect("a pattern")
        .prop_map(Value::String)
        .boxed()
}

fn object(doc: &Value, schema: &Value, depth: usize) -> BoxedStrategy<Value> {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut fields: Vec<BoxedStrategy<Option<(String, Value)>>> = Vec::new();
    for (k, s) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let (k, value) = (k.clone(), strategy(doc, s, depth + 1));
        if required.contains(&k.as_str()) {
            fields.push(value.prop_map(move |v| Some((k.clone(), v))).boxed());
        } else {
            fields.push(prop::option::of(value.prop_map(move |v| (k.clone(), v))).boxed());
        }
    }
    // Keys the schema leaves open (`additionalProperties`), with values it allows.
    let extra = match schema.get("additionalProperties") {
        Some(Value::Bool(false)) | None => Just(None).boxed(),
        Some(Value::Bool(true)) => prop::option::of(any_value(depth + 1)).boxed(),
        Some(s) => prop::option::of(strategy(doc, s, depth + 1)).boxed(),
    };
    // Maps' keys: uuids (providers, consumers), class names, or others.
    let names = prop_oneof![
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string()),
        "[A-Z][A-Z0-9_]{0,8}",
        "x_[a-z]{1,8}",
    ];
    let min = schema.get("minProperties").and_then(Value::as_u64).unwrap_or(0) as usize;
    (fields, extra, names)
        .prop_map(|(fields, extra, name)| {
            let mut o: Map<String, Value> = fields.into_iter().flatten().collect();
            if let Some(v) = extra {
                o.insert(name, v);
            }
            o
        })
        .prop_filter("enough properties", move |o| o.len() >= min)
        .prop_map(Value::Object)
        .boxed()
}

/// Any JSON value, shallow.
fn any_value(depth: usize) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(|n| json!(n)),
        "[a-z]{0,8}".prop_map(Value::String),
    ];
    if depth > 3 {
        return leaf.boxed();
    }
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}
