//! Reservation parameters as a plugin declares them: each name and its
//! type. A reservation naming anything else is refused with the names, and
//! each value is read as its type and kept in its JSON form (a number as a
//! number), so what is stored and shown back means what the plugin reads.

use berth_core::error::ErrorCode;
use berth_core::Error;
use serde_json::{Map, Value};

/// What a parameter's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// A whole number; Blazar's clients may send it as a string of digits.
    Integer,
    /// `true` or `false`; also the strings `"true"` and `"false"`.
    Boolean,
    /// Text.
    String,
    /// A list of strings.
    StringList,
    /// Blazar's property query: a JSON list, or a string that holds one.
    Query,
    /// `true`, `false` or `null`; also those words as strings.
    OptionalBoolean,
    /// An identifier: text, or a whole number read as its digits (Nova's
    /// flavor ids are often numbers, and Blazar's CLI sends "1" as 1).
    Id,
}

/// One declared parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: ParamType,
}

impl ParamType {
    /// The type's name, as `GET /v1/plugins` shows it.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Integer => "integer",
            ParamType::Boolean => "boolean",
            ParamType::String => "string",
            ParamType::StringList => "string_list",
            ParamType::Query => "query",
            ParamType::OptionalBoolean => "optional_boolean",
            ParamType::Id => "id",
        }
    }
}

pub const fn param(name: &'static str, kind: ParamType) -> Param {
    Param { name, kind }
}

/// Keys every reservation may carry that are not parameters: what the API
/// shows back (a client may send a shown reservation as it is) and Blazar's
/// own envelope keys. They are dropped, never stored.
pub const SHOWN_KEYS: &[&str] = &[
    "id",
    "lease_id",
    "resource_type",
    "resource_id",
    "status",
    "missing_resources",
    "resources_changed",
    "created_at",
    "updated_at",
    "allocations",
];

/// `reservation`'s parameters checked against `declared` and read as their
/// types; the shown keys dropped. Null means "the default" for any of them.
pub fn normalize(resource_type: &str, declared: &[Param], reservation: &Value) -> Result<Value, Error> {
    let Some(obj) = reservation.as_object() else {
        return Err(Error::invalid(ErrorCode::InvalidLease, "a reservation is a JSON object"));
    };
    let unknown: Vec<&str> = obj
        .keys()
        .map(String::as_str)
        .filter(|k| !SHOWN_KEYS.contains(k) && !declared.iter().any(|p| p.name == *k))
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = declared.iter().map(|p| p.name).collect();
        return Err(Error::invalid(
            ErrorCode::UnknownParameter,
            format!(
                "{resource_type} has no parameter {}; it takes {}",
                unknown.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", "),
                known.join(", ")
            ),
        ));
    }
    let mut out = Map::new();
    for p in declared {
        if let Some(v) = obj.get(p.name) {
            out.insert(p.name.to_string(), read(resource_type, p, v)?);
        }
    }
    Ok(Value::Object(out))
}

fn read(resource_type: &str, p: &Param, v: &Value) -> Result<Value, Error> {
    let bad = |what: &str| {
        Error::invalid(
            ErrorCode::InvalidParameter,
            format!("{resource_type} parameter {} must be {what}, not {v}", p.name),
        )
    };
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match (p.kind, v) {
        (ParamType::Integer, Value::Number(n)) if n.is_i64() => v.clone(),
        (ParamType::Integer, Value::String(s)) => {
            Value::from(s.trim().parse::<i64>().map_err(|_| bad("a whole number"))?)
        }
        (ParamType::Integer, _) => return Err(bad("a whole number")),
        (ParamType::Boolean | ParamType::OptionalBoolean, Value::Bool(_)) => v.clone(),
        (ParamType::Boolean | ParamType::OptionalBoolean, Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" | "none" | "" if p.kind == ParamType::OptionalBoolean => Value::Null,
            _ => return Err(bad("true or false")),
        },
        (ParamType::Boolean | ParamType::OptionalBoolean, _) => return Err(bad("true or false")),
        (ParamType::String, Value::String(_)) => v.clone(),
        (ParamType::String, _) => return Err(bad("a string")),
        (ParamType::Id, Value::String(_)) => v.clone(),
        (ParamType::Id, Value::Number(n)) if n.is_i64() || n.is_u64() => Value::String(n.to_string()),
        (ParamType::Id, _) => return Err(bad("an identifier (a string or a whole number)")),
        (ParamType::StringList, Value::Array(items)) if items.iter().all(Value::is_string) => v.clone(),
        (ParamType::StringList, _) => return Err(bad("a list of strings")),
        (ParamType::Query, Value::String(_) | Value::Array(_)) => v.clone(),
        (ParamType::Query, _) => return Err(bad("a property query (a JSON list, or a string holding one)")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DECLARED: &[Param] = &[
        param("min", ParamType::Integer),
        param("flag", ParamType::Boolean),
        param("ids", ParamType::StringList),
        param("q", ParamType::Query),
    ];

    #[test]
    fn unknown_keys_are_named_and_values_read_as_their_types() {
        let n = |v: Value| normalize("t", DECLARED, &v);
        assert_eq!(
            n(json!({"min": "2", "flag": "True", "ids": ["a"], "q": "", "id": "x", "status": "pending"})).unwrap(),
            json!({"min": 2, "flag": true, "ids": ["a"], "q": ""})
        );
        let e = n(json!({"min": 1, "mni": 2, "hypervisor_propertie": ""})).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownParameter);
        assert!(e.detail.contains("\"mni\"") && e.detail.contains("\"hypervisor_propertie\""), "{}", e.detail);
        for bad in
            [json!({"min": "two"}), json!({"min": 1.5}), json!({"flag": 1}), json!({"ids": [1]}), json!({"q": 3})]
        {
            assert_eq!(n(bad.clone()).unwrap_err().code, ErrorCode::InvalidParameter, "{bad}");
        }
        assert_eq!(n(json!({"min": null})).unwrap(), json!({"min": null}));
        assert!(n(json!([1])).is_err());
    }
}
