//! A small JSON Schema validator for Placement's request bodies and query
//! strings. It covers the keywords Placement's schemas use and words its
//! errors the way Placement's clients (and its conformance tests) expect:
//! `'total' is a required property  Failed validating 'required' in
//! schema: {...}  On instance: {...}`, all on one line, as Placement's
//! error document carries it (its clients show only the last line of an
//! error's detail).
//!
//! Of several errors, the shallowest is reported (the first found among
//! equals), as the reference implementation's "best match" does.

use std::borrow::Cow;

use regex::Regex;
use serde_json::{Map, Value};

/// One validation failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub message: String,
    pub keyword: &'static str,
    /// Where the failing keyword sits in the schema (without the keyword).
    pub schema_path: Vec<String>,
    /// Where the failing value sits in the instance: object keys quoted,
    /// array indexes bare, as Python writes them (`['a']`, `[0]`).
    pub instance_path: Vec<String>,
    /// The schema node whose keyword failed.
    pub schema: Box<Value>,
    /// The value that failed it.
    pub instance: Box<Value>,
}

/// The error on one line: the message, the keyword and schema node, the
/// value, as Placement's validator words them. Placement's error document
/// turns the line breaks of that wording into spaces, and so does this
/// (two where a blank line was), so that a client that shows only an
/// error's last line shows the reason whole.
impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at: String = self.schema_path.iter().map(|p| format!("[{}]", py_str(p))).collect();
        let on: String = self.instance_path.iter().map(|p| format!("[{p}]")).collect();
        write!(
            f,
            "{}  Failed validating {} in schema{at}:     {}  On instance{on}:     {}",
            self.message,
            py_str(self.keyword),
            py_repr(&self.schema),
            py_repr(&self.instance)
        )
    }
}

/// Validates `instance` against `schema`; the most relevant error if any.
pub fn validate(instance: &Value, schema: &Value) -> Result<(), Invalid> {
    let mut errors = Vec::new();
    check(instance, schema, &mut Vec::new(), &mut Vec::new(), &mut errors);
    match errors.into_iter().min_by_key(|e| e.instance_path.len()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A Python-style repr of a string: control characters escaped, so that
/// it is one line whatever the string holds.
pub fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// A Python-style repr of a JSON value.
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| !n.is_i64() && !n.is_u64()) {
                if f.fract() == 0.0 && f.abs() < 1e16 {
                    format!("{f:.1}")
                } else {
                    format!("{f}")
                }
            } else {
                n.to_string()
            }
        }
        Value::String(s) => py_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter().map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn is_type(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
            _ => false,
        },
        _ => false,
    }
}

fn is_uuid(s: &str) -> bool {
    // Placement accepts dashed and dashless forms (what a UUID parser accepts).
    uuid::Uuid::try_parse(s).is_ok()
}

fn matches(pattern: &str, s: &str) -> bool {
    thread_local! {
        static COMPILED: std::cell::RefCell<std::collections::HashMap<String, Option<Regex>>> = Default::default();
    }
    // Patterns are the schemas' own constants: compile each once per thread.
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if !c.contains_key(pattern) {
            c.insert(pattern.to_string(), Regex::new(pattern).ok());
        }
        c[pattern].as_ref().is_some_and(|re| re.is_match(s))
    })
}

/// Where a check is in the schema: borrowed from it (copied only into an
/// error).
type Path<'a> = Vec<Cow<'a, str>>;

/// One step into the instance: an object's key or an array's index.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Where a check is in the instance.
type At<'a> = Vec<Step<'a>>;

fn owned(path: &[Cow<'_, str>]) -> Vec<String> {
    path.iter().map(|p| p.to_string()).collect()
}

/// The instance path as Python indexes it: keys quoted, indexes bare.
fn indexes(at: &[Step<'_>]) -> Vec<String> {
    at.iter()
        .map(|s| match s {
            Step::Key(k) => py_str(k),
            Step::Index(i) => i.to_string(),
        })
        .collect()
}

fn unexpected(extras: &[&String]) -> String {
    let names: Vec<String> = extras.iter().map(|e| py_str(e)).collect();
    let verb = if extras.len() == 1 { "was" } else { "were" };
    format!("({} {verb} unexpected)", names.join(", "))
}

fn check<'a>(
    instance: &'a Value,
    schema: &'a Value,
    spath: &mut Path<'a>,
    ipath: &mut At<'a>,
    errors: &mut Vec<Invalid>,
) {
    let Some(s) = schema.as_object() else { return };
    // This node's failures, given their paths once its children are checked
    // (the paths are back to this node's then): copying both paths at
    // every node was most of a valid body's cost. Children's errors are
    // deeper, so the order that decides among equals is unchanged.
    let mut failed: Vec<(&'static str, String)> = Vec::new();
    check_node(instance, s, spath, ipath, errors, &mut |keyword, message| failed.push((keyword, message)));
    for (keyword, message) in failed {
        errors.push(Invalid {
            message,
            keyword,
            schema_path: owned(spath),
            instance_path: indexes(ipath),
            schema: Box::new(schema.clone()),
            instance: Box::new(instance.clone()),
        });
    }
}

fn check_node<'a>(
    instance: &'a Value,
    s: &'a Map<String, Value>,
    spath: &mut Path<'a>,
    ipath: &mut At<'a>,
    errors: &mut Vec<Invalid>,
    fail: &mut impl FnMut(&'static str, String),
) {
    if let Some(ty) = s.get("type") {
        let types = || -> Vec<&str> {
            match ty {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            }
        };
        let is_one = match ty {
            Value::String(t) => is_type(instance, t),
            _ => types().iter().any(|t| is_type(instance, t)),
        };
        if !is_one {
            let types = types();
            let names: Vec<String> = types.iter().map(|t| py_str(t)).collect();
            fail("type", format!("{} is not of type {}", py_repr(instance), names.join(", ")));
            return;
        }
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array) {
        if !allowed.contains(instance) {
            let list = py_repr(&Value::Array(allowed.clone()));
            fail("enum", format!("{} is not one of {list}", py_repr(instance)));
        }
    }
    if let Some(any_of) = s.get("anyOf").and_then(Value::as_array) {
        let ok = any_of.iter().any(|sub| {
            let mut sub_errors = Vec::new();
            check(instance, sub, &mut Vec::new(), &mut Vec::new(), &mut sub_errors);
            sub_errors.is_empty()
        });
        if !ok {
            fail("anyOf", format!("{} is not valid under any of the given schemas", py_repr(instance)));
        }
    }
    match instance {
        Value::Object(o) => check_object(o, s, spath, ipath, errors, fail),
        Value::Array(a) => check_array(instance, a, s, spath, ipath, errors, fail),
        Value::String(text) => check_string(instance, text, s, fail),
        Value::Number(n) => check_number(instance, n, s, fail),
        _ => {}
    }
}

fn check_array<'a>(
    instance: &Value,
    a: &'a [Value],
    s: &'a Map<String, Value>,
    spath: &mut Path<'a>,
    ipath: &mut At<'a>,
    errors: &mut Vec<Invalid>,
    fail: &mut impl FnMut(&'static str, String),
) {
    if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
        if (a.len() as u64) < min {
            fail("minItems", format!("{} is too short", py_repr(instance)));
        }
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true)) {
        let dup = a.iter().enumerate().any(|(i, x)| a[..i].contains(x));
        if dup {
            fail("uniqueItems", format!("{} has non-unique elements", py_repr(instance)));
        }
    }
    if let Some(items) = s.get("items") {
        spath.push(Cow::Borrowed("items"));
        for (i, item) in a.iter().enumerate() {
            ipath.push(Step::Index(i));
            check(item, items, spath, ipath, errors);
            ipath.pop();
        }
        spath.pop();
    }
}

fn check_string(instance: &Value, text: &str, s: &Map<String, Value>, fail: &mut impl FnMut(&'static str, String)) {
    let len = text.chars().count() as u64;
    if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
        if len < min {
            fail("minLength", format!("{} is too short", py_repr(instance)));
        }
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
        if len > max {
            fail("maxLength", format!("{} is too long", py_repr(instance)));
        }
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        if !matches(p, text) {
            fail("pattern", format!("{} does not match {}", py_repr(instance), py_str(p)));
        }
    }
    if s.get("format").and_then(Value::as_str) == Some("uuid") && !is_uuid(text) {
        fail("format", format!("{} is not a 'uuid'", py_repr(instance)));
    }
}

fn check_number(
    instance: &Value,
    n: &serde_json::Number,
    s: &Map<String, Value>,
    fail: &mut impl FnMut(&'static str, String),
) {
    let x = n.as_f64().unwrap_or(0.0);
    if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
        if x < min {
            let m = py_repr(&s["minimum"]);
            fail("minimum", format!("{} is less than the minimum of {m}", py_repr(instance)));
        }
    }
    if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
        if x > max {
            let m = py_repr(&s["maximum"]);
            fail("maximum", format!("{} is greater than the maximum of {m}", py_repr(instance)));
        }
    }
}

fn check_object<'a>(
    o: &'a Map<String, Value>,
    s: &'a Map<String, Value>,
    spath: &mut Path<'a>,
    ipath: &mut At<'a>,
    errors: &mut Vec<Invalid>,
    fail: &mut impl FnMut(&'static str, String),
) {
    if let Some(required) = s.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !o.contains_key(name) {
                fail("required", format!("{} is a required property", py_str(name)));
            }
        }
    }
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64) {
        if (o.len() as u64) < min {
            let instance = Value::Object(o.clone());
            fail("minProperties", format!("{} does not have enough properties", py_repr(&instance)));
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    let patterns = s.get("patternProperties").and_then(Value::as_object);
    let mut extras: Vec<&String> = Vec::new();
    for (key, value) in o {
        let mut known = false;
        if let Some(sub) = properties.and_then(|p| p.get(key)) {
            known = true;
            spath.extend([Cow::Borrowed("properties"), Cow::Borrowed(key.as_str())]);
            ipath.push(Step::Key(key.as_str()));
            check(value, sub, spath, ipath, errors);
            ipath.pop();
            spath.truncate(spath.len() - 2);
        }
        for (pattern, sub) in patterns.into_iter().flatten() {
            if matches(pattern, key) {
                known = true;
                spath.extend([Cow::Borrowed("patternProperties"), Cow::Borrowed(pattern.as_str())]);
                ipath.push(Step::Key(key.as_str()));
                check(value, sub, spath, ipath, errors);
                ipath.pop();
                spath.truncate(spath.len() - 2);
            }
        }
        if !known {
            extras.push(key);
        }
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(false)) if !extras.is_empty() => {
            if let Some(patterns) = patterns {
                let mut regexes: Vec<String> = patterns.keys().map(|p| py_str(p)).collect();
                regexes.sort();
                let names: Vec<String> = extras.iter().map(|e| py_str(e)).collect();
                let verb = if extras.len() == 1 { "does" } else { "do" };
                fail(
                    "additionalProperties",
                    format!("{} {verb} not match any of the regexes: {}", names.join(", "), regexes.join(", ")),
                );
            } else {
                fail("additionalProperties", format!("Additional properties are not allowed {}", unexpected(&extras)));
            }
        }
        Some(sub @ Value::Object(_)) => {
            spath.push(Cow::Borrowed("additionalProperties"));
            for key in extras {
                ipath.push(Step::Key(key.as_str()));
                check(&o[key], sub, spath, ipath, errors);
                ipath.pop();
            }
            spath.pop();
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "total": {"type": "integer", "minimum": 1, "maximum": 2147483647},
                "name": {"type": "string", "maxLength": 5, "pattern": "^[A-Z]+$"},
                "uuid": {"type": "string", "format": "uuid"},
                "list": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 1},
            },
            "required": ["total"],
            "additionalProperties": false
        })
    }

    fn err(v: Value) -> String {
        validate(&v, &schema()).unwrap_err().to_string()
    }

    #[test]
    fn messages_read_like_placements() {
        assert!(validate(&json!({"total": 3}), &schema()).is_ok());
        assert_eq!(
            err(json!({"total": 0})),
            "0 is less than the minimum of 1  Failed validating 'minimum' in schema['properties']['total']:     \
             {'type': 'integer', 'minimum': 1, 'maximum': 2147483647}  On instance['total']:     0"
        );
        assert_eq!(
            err(json!({"total": 1, "list": ["a", 7]})),
            "7 is not of type 'string'  Failed validating 'type' in schema['properties']['list']['items']:     \
             {'type': 'string'}  On instance['list'][1]:     7"
        );
        let e = err(json!({"total": 1, "name": "two\nlines"}));
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(e.contains(r"'two\nlines' is too long"), "{e}");
        assert!(err(json!({})).starts_with("'total' is a required property"));
        assert!(
            err(json!({"total": 1, "bad": 1})).contains("Additional properties are not allowed ('bad' was unexpected)")
        );
        assert!(err(json!({"total": "x"})).starts_with("'x' is not of type 'integer'"));
        assert!(err(json!({"total": 2147483648u64})).contains("Failed validating 'maximum'"));
        assert!(err(json!({"total": 1, "name": "TOOLONG"})).contains("Failed validating 'maxLength'"));
        assert!(err(json!({"total": 1, "name": "ab"})).contains("'ab' does not match '^[A-Z]+$'"));
        assert!(err(json!({"total": 1, "uuid": "harry"})).contains("'harry' is not a 'uuid'"));
        assert!(err(json!({"total": 1, "list": ["a", "a"]})).contains("has non-unique elements"));
        assert!(err(json!({"total": 1, "list": []})).contains("Failed validating 'minItems'"));
    }

    #[test]
    fn pattern_properties_and_depth() {
        let s = json!({
            "type": "object",
            "minProperties": 1,
            "patternProperties": {"^[A-Z0-9_]+$": {"type": "integer", "minimum": 1}},
            "additionalProperties": false
        });
        let e = validate(&json!({"cow": 1}), &s).unwrap_err();
        assert_eq!(e.message, "'cow' does not match any of the regexes: '^[A-Z0-9_]+$'");
        let e = validate(&json!({}), &s).unwrap_err();
        assert_eq!(e.keyword, "minProperties");
        let e = validate(&json!({"VCPU": 0}), &s).unwrap_err();
        assert_eq!(e.keyword, "minimum");
        assert_eq!(e.schema_path, vec!["patternProperties".to_string(), "^[A-Z0-9_]+$".to_string()]);
    }
}
