//! Reading a Blazar request body into its type (those of `super::bodies`,
//! which also describe it in `/openapi.json`). serde reads it; a body it
//! cannot read is refused in Blazar's words, which each body type gives for
//! the field at fault and the value found there ([`Body::refusal`]).

use axum::body::Bytes;
use berth_core::error::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;

use crate::error::ApiError;

/// A step into a body: a key of an object or an index of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum At<'a> {
    Key(&'a str),
    Index(usize),
}

/// A request body serde reads, and how Blazar refuses one it cannot.
pub(super) trait Body: DeserializeOwned {
    /// The keys that may wrap the body, each alone in its object, in the
    /// order they are taken off (`{"lease": {...}}`, as Blazar accepts).
    const WRAPPERS: &'static [&'static str];

    /// The refusal of the value at `at` (`given`; None where it is absent),
    /// which serde could not read as the field's type.
    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError;
}

/// The body as a JSON object, taken out of `wrappers` (each in turn, where
/// it is the object's only key and holds an object).
pub(super) fn object(body: &Bytes, wrappers: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidLease, format!("the body is not JSON: {e}")))?;
    let Value::Object(mut obj) = v else {
        return Err(ApiError::bad_request(ErrorCode::InvalidLease, "the body must be a JSON object"));
    };
    for wrapper in wrappers {
        if obj.len() == 1 {
            if let Some(Value::Object(inner)) = obj.get_mut(*wrapper) {
                obj = std::mem::take(inner);
            }
        }
    }
    Ok(obj)
}

/// The object (of [`object`]) as `T`, or `T`'s refusal of the first field
/// serde could not read.
pub(super) fn typed<T: Body>(obj: &Map<String, Value>) -> Result<T, ApiError> {
    let whole = Value::Object(obj.clone());
    serde_path_to_error::deserialize(&whole).map_err(|e| {
        let mut at: Vec<At<'_>> = e
            .path()
            .iter()
            .filter_map(|s| match s {
                Segment::Map { key } => Some(At::Key(key.as_str())),
                Segment::Seq { index } => Some(At::Index(*index)),
                Segment::Enum { .. } | Segment::Unknown => None,
            })
            .collect();
        // serde reports a missing field, and an unknown one, at the object
        // that lacks or has it.
        let message = e.inner().to_string();
        if let Some((key, known)) = unknown_field(&message) {
            return unknown_key::<T>(&at, key, &known);
        }
        match missing_field(&message) {
            Some(field) => {
                at.push(At::Key(field));
                T::refusal(&at, None)
            }
            None => T::refusal(&at, found(&whole, &at)),
        }
    })
}

/// Both steps: the body of `T` out of its wrappers, then read.
pub(super) fn read<T: Body>(body: &Bytes) -> Result<T, ApiError> {
    typed(&object(body, T::WRAPPERS)?)
}

/// The field serde's "missing field `x`" names.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// The key and the known keys serde's "unknown field `x`, expected one of
/// `a`, `b`" names (Berth's own objects deny keys they do not know).
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let mut quoted = rest.split('`').step_by(2);
    let key = quoted.next()?;
    Some((key, quoted.collect()))
}

/// The refusal of a key an object of Berth's own does not have, naming
/// the object (the body's wrapper at the top), the key and the keys it has.
fn unknown_key<T: Body>(at: &[At<'_>], key: &str, known: &[&str]) -> ApiError {
    // The path may end at the key itself.
    let at = match at.split_last() {
        Some((At::Key(last), object)) if *last == key => object,
        _ => at,
    };
    let object = match at {
        [] => T::WRAPPERS.first().copied().unwrap_or("the body").to_string(),
        _ => dotted(at),
    };
    // The key as the client sent it, bounded: it is theirs.
    let key: String = key.chars().take(64).collect();
    ApiError::bad_request(ErrorCode::UnknownKey, format!("{object}: unknown key {key:?}; known: {}", known.join(", ")))
}

/// The value at `at` in `v`, if there is one.
fn found<'v>(v: &'v Value, at: &[At<'_>]) -> Option<&'v Value> {
    at.iter().try_fold(v, |v, step| match step {
        At::Key(k) => v.get(*k),
        At::Index(i) => v.get(*i),
    })
}

/// Absent, or null: what Blazar calls not given.
pub(super) fn absent(given: Option<&Value>) -> bool {
    given.is_none_or(Value::is_null)
}

/// The value as a message shows it (`null` where absent).
pub(super) fn shown(given: Option<&Value>) -> &Value {
    given.unwrap_or(&Value::Null)
}

/// The refusal of a field serde could not read as a string: the same in
/// every body, lease or not.
pub(super) fn not_a_string(key: &str, given: Option<&Value>) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, format!("{key} must be a string, not {}", shown(given)))
}

/// The refusal of a field no body type words itself: a string field's
/// where it is one, else a plain "is required" of the field's path.
pub(super) fn refused(code: ErrorCode, at: &[At<'_>], given: Option<&Value>) -> ApiError {
    match (at.last(), given) {
        (Some(At::Key(k)), Some(v)) if !v.is_null() && !v.is_string() => not_a_string(k, given),
        _ => ApiError::bad_request(code, format!("{} is required", dotted(at))),
    }
}

/// `a.b[0].c`, for a message.
pub(super) fn dotted(at: &[At<'_>]) -> String {
    let mut out = String::new();
    for step in at {
        match step {
            At::Key(k) if out.is_empty() => out.push_str(k),
            At::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            At::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    struct Inner {
        id: uuid::Uuid,
    }

    /// A body whose refusal names where serde stopped and what it found.
    #[derive(Debug, Deserialize)]
    struct Probe {
        name: String,
        #[serde(default)]
        items: Option<Vec<Inner>>,
        #[serde(flatten)]
        rest: Map<String, Value>,
    }

    impl Body for Probe {
        const WRAPPERS: &'static [&'static str] = &["probe", "values"];
        fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
            ApiError::bad_request(ErrorCode::InvalidLease, format!("{} {:?}", dotted(at), given))
        }
    }

    fn refusal(v: Value) -> String {
        read::<Probe>(&Bytes::from(v.to_string())).unwrap_err().detail
    }

    #[test]
    fn a_refusal_names_the_field_and_what_was_there() {
        assert_eq!(refusal(json!({"items": []})), "name None");
        assert_eq!(refusal(json!({"name": 5})), "name Some(Number(5))");
        assert_eq!(refusal(json!({"name": "n", "items": [{"id": "nope"}]})), "items[0].id Some(String(\"nope\"))");
        assert_eq!(refusal(json!({"name": "n", "items": [{}]})), "items[0].id None");
        assert_eq!(refusal(json!({"name": "n", "items": [5]})), "items[0] Some(Number(5))");
        // Through the wrappers, and beside the flattened map.
        assert_eq!(refusal(json!({"probe": {"values": {"name": null, "x": 1}}})), "name Some(Null)");
        let id = uuid::Uuid::nil();
        let p = read::<Probe>(&Bytes::from(
            json!({"probe": {"name": "n", "gpu": true, "items": [{"id": id}]}}).to_string(),
        ))
        .unwrap();
        assert_eq!((p.name.as_str(), p.items.map(|i| i[0].id)), ("n", Some(id)));
        assert_eq!(Value::Object(p.rest), json!({"gpu": true}));
    }

    #[test]
    fn only_an_object_is_a_body() {
        let e = read::<Probe>(&Bytes::from_static(b"[1]")).unwrap_err();
        assert_eq!(e.detail, "the body must be a JSON object");
        let e = read::<Probe>(&Bytes::from_static(b"{nope")).unwrap_err();
        assert!(e.detail.starts_with("the body is not JSON: "), "{}", e.detail);
        // A wrapper beside another key is a field like any other.
        let e = read::<Probe>(&Bytes::from(json!({"probe": {"name": "n"}, "x": 1}).to_string())).unwrap_err();
        assert_eq!(e.detail, "name None");
    }

    /// A route that reads a body, the type it reads it as, and that type's parser.
    struct Reader {
        method: &'static str,
        path: &'static str,
        name: String,
        parse: fn(&Map<String, Value>) -> Result<(), ApiError>,
    }

    fn reader<T: Body + utoipa::ToSchema>(method: &'static str, path: &'static str) -> Reader {
        Reader { method, path, name: T::name().into_owned(), parse: |obj| typed::<T>(obj).map(drop) }
    }

    /// Every Blazar body, by the route whose handler reads it.
    fn readers() -> Vec<Reader> {
        use crate::blazar::bodies::*;
        vec![
            reader::<NewLease>("post", "/v1/leases"),
            reader::<LeaseChange>("put", "/v1/leases/{id}"),
            reader::<AvailabilityQuery>("post", "/v1/availability"),
            reader::<OfferQuery>("post", "/v1/offers"),
            reader::<NewHost>("post", "/v1/os-hosts"),
            reader::<HostChange>("put", "/v1/os-hosts/{id}"),
            reader::<PropertyChange>("patch", "/v1/os-hosts/properties/{name}"),
            reader::<NewMaintenance>("post", "/v1/maintenance"),
            reader::<SplitLease>("post", "/v1/leases/{id}/split"),
            reader::<TransferLease>("post", "/v1/leases/{id}/transfer"),
            reader::<crate::blazar::leases::share::ShareBody>("put", "/v1/leases/{id}/shared_with"),
        ]
    }

    fn document() -> Value {
        serde_json::to_value(crate::openapi::document()).unwrap()
    }

    /// The document describes each Blazar body as the type its handler
    /// reads, and no route takes a body that no type reads.
    #[test]
    fn each_route_describes_the_type_it_reads() {
        let doc = document();
        let readers = readers();
        let own = serde_json::to_value(crate::blazar::openapi()).unwrap();
        for (path, item) in own["paths"].as_object().unwrap() {
            for (method, _) in item.as_object().unwrap() {
                let Some(schema) = examples::request_schema(&doc, method, path) else { continue };
                let r = readers.iter().find(|r| (r.method, r.path) == (method.as_str(), path.as_str()));
                let r = r.unwrap_or_else(|| panic!("{method} {path} takes a body no Blazar type reads"));
                assert_eq!(examples::ref_name(schema), Some(r.name.as_str()), "{method} {path}");
            }
        }
        for r in &readers {
            assert!(
                examples::request_schema(&doc, r.method, r.path).is_some(),
                "{} {} is not documented",
                r.method,
                r.path
            );
        }
    }

    use crate::openapi::examples;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    /// Every body the document allows, its route's parser reads.
    #[test]
    fn each_parser_reads_every_body_its_description_allows() {
        let doc = document();
        for r in readers() {
            let schema = examples::request_schema(&doc, r.method, r.path).unwrap();
            let mut runner = TestRunner::new(Config { cases: 200, failure_persistence: None, ..Config::default() });
            let outcome = runner.run(&examples::values(&doc, schema), |body| {
                let obj = body.as_object().cloned().unwrap_or_default();
                prop_assert!((r.parse)(&obj).is_ok(), "{}", (r.parse)(&obj).unwrap_err().detail);
                Ok(())
            });
            if let Err(e) = outcome {
                panic!("{} {} ({}): {e}", r.method, r.path, r.name);
            }
        }
    }
}
