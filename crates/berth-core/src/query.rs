//! Blazar's host property query language: `[op, "$key", value]`, with
//! `and`, `or`, `not` and `in`. Blazar sends it as JSON or as a string
//! holding JSON; an empty string or list means "any host".
//!
//! Unlike Blazar, which compares everything as strings (so "10" < "9"),
//! two sides that both read as numbers are compared as numbers; anything
//! else is compared as text.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, ErrorCode};

#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    And(Vec<Query>),
    Or(Vec<Query>),
    Not(Box<Query>),
    Compare(CmpOp, Term, Term),
    In(Term, Vec<Term>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A side of a comparison: a host property (`$name`) or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    Property(String),
    Literal(Value),
}

/// Reads a query as Blazar clients send it: a JSON list, a string holding
/// one, or nothing. `Ok(None)` means no filter.
pub fn parse(field: &str, v: &Value) -> Result<Option<Query>, Error> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => {
            let inner: Value = serde_json::from_str(s)
                .map_err(|e| Error::invalid(ErrorCode::Invalid, format!("{field}: {s:?} is not a JSON query: {e}")))?;
            if inner.is_string() {
                return Err(Error::invalid(ErrorCode::Invalid, format!("{field}: a query is a JSON list")));
            }
            parse(field, &inner)
        }
        Value::Array(a) if a.is_empty() => Ok(None),
        Value::Array(_) => parse_list(field, v).map(Some),
        _ => Err(Error::invalid(
            ErrorCode::Invalid,
            format!("{field}: a query is a JSON list like [\">=\", \"$vcpus\", 4]"),
        )),
    }
}

fn parse_list(field: &str, v: &Value) -> Result<Query, Error> {
    let bad = |what: String| Error::invalid(ErrorCode::Invalid, format!("{field}: {what}"));
    let Some(items) = v.as_array() else {
        return Err(bad(format!("{v} is not a query list")));
    };
    let Some(op) = items.first().and_then(Value::as_str) else {
        return Err(bad(format!("{v}: a query starts with its operator")));
    };
    let args = &items[1..];
    let sub = |args: &[Value]| args.iter().map(|a| parse_list(field, a)).collect::<Result<Vec<_>, _>>();
    let q = match op {
        "and" | "or" => {
            if args.is_empty() {
                return Err(bad(format!("{op} needs at least one query")));
            }
            if op == "and" {
                Query::And(sub(args)?)
            } else {
                Query::Or(sub(args)?)
            }
        }
        "not" => {
            if args.len() != 1 {
                return Err(bad("not takes exactly one query".into()));
            }
            Query::Not(Box::new(parse_list(field, &args[0])?))
        }
        "in" => {
            if args.len() < 2 {
                return Err(bad("in takes a value and at least one choice".into()));
            }
            Query::In(term(field, &args[0])?, args[1..].iter().map(|a| term(field, a)).collect::<Result<_, _>>()?)
        }
        "=" | "==" | "!=" | "<" | "<=" | ">" | ">=" => {
            if args.len() != 2 {
                return Err(bad(format!("{op} compares exactly two values")));
            }
            let cmp = match op {
                "=" | "==" => CmpOp::Eq,
                "!=" => CmpOp::Ne,
                "<" => CmpOp::Lt,
                "<=" => CmpOp::Le,
                ">" => CmpOp::Gt,
                _ => CmpOp::Ge,
            };
            Query::Compare(cmp, term(field, &args[0])?, term(field, &args[1])?)
        }
        other => return Err(bad(format!("unknown operator {other:?}"))),
    };
    Ok(q)
}

fn term(field: &str, v: &Value) -> Result<Term, Error> {
    match v {
        Value::String(s) if s.starts_with('$') && s.len() > 1 => Ok(Term::Property(s[1..].to_string())),
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(Term::Literal(v.clone())),
        _ => Err(Error::invalid(ErrorCode::Invalid, format!("{field}: {v} is not a value or a $property"))),
    }
}

/// A value compared as a number when it reads as one, as text otherwise.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Num(f64),
    Text(String),
}

fn scalar(v: &Value) -> Option<Scalar> {
    match v {
        Value::Number(n) => n.as_f64().map(Scalar::Num),
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => Some(Scalar::Num(f)),
            _ => Some(Scalar::Text(s.clone())),
        },
        Value::Bool(b) => Some(Scalar::Text(if *b { "True".into() } else { "False".into() })),
        _ => None,
    }
}

fn text(s: &Scalar) -> String {
    match s {
        Scalar::Num(f) => format!("{f}"),
        Scalar::Text(t) => t.clone(),
    }
}

fn compare(a: &Scalar, b: &Scalar) -> Option<Ordering> {
    match (a, b) {
        (Scalar::Num(x), Scalar::Num(y)) => x.partial_cmp(y),
        (Scalar::Text(x), Scalar::Text(y)) => {
            // Booleans as Blazar stores them ("True") match true/"true".
            if x.eq_ignore_ascii_case(y) && matches!(x.to_ascii_lowercase().as_str(), "true" | "false") {
                Some(Ordering::Equal)
            } else {
                Some(x.cmp(y))
            }
        }
        _ => Some(text(a).cmp(&text(b))),
    }
}

impl Query {
    /// Properties a host must hold as exactly these strings to match: each
    /// `==` of a property and a text that reads as no number and no
    /// boolean, alone or in a top-level `and` (no other value compares
    /// equal to such a text). Necessary, not sufficient: a store may narrow
    /// what it reads by them, and still asks [`Query::matches`].
    pub fn required_texts(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let conjuncts = match self {
            Query::And(qs) => qs.iter().collect(),
            q => vec![q],
        };
        for q in conjuncts {
            let Query::Compare(CmpOp::Eq, a, b) = q else {
                continue;
            };
            let ((Term::Property(p), Term::Literal(Value::String(s)))
            | (Term::Literal(Value::String(s)), Term::Property(p))) = (a, b)
            else {
                continue;
            };
            if matches!(scalar(&Value::String(s.clone())), Some(Scalar::Text(_)))
                && !matches!(s.to_ascii_lowercase().as_str(), "true" | "false")
            {
                out.entry(p.clone()).or_insert_with(|| s.clone());
            }
        }
        out
    }

    /// Whether a host whose properties `lookup` answers matches. A property
    /// the host lacks makes its comparison false.
    pub fn matches(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> bool {
        let value = |t: &Term| -> Option<Scalar> {
            match t {
                Term::Property(p) => lookup(p).as_ref().and_then(scalar),
                Term::Literal(v) => scalar(v),
            }
        };
        match self {
            Query::And(qs) => qs.iter().all(|q| q.matches(lookup)),
            Query::Or(qs) => qs.iter().any(|q| q.matches(lookup)),
            Query::Not(q) => !q.matches(lookup),
            Query::In(t, choices) => match value(t) {
                Some(v) => choices.iter().filter_map(value).any(|c| compare(&v, &c) == Some(Ordering::Equal)),
                None => false,
            },
            Query::Compare(op, a, b) => {
                let (Some(a), Some(b)) = (value(a), value(b)) else {
                    return false;
                };
                let Some(ord) = compare(&a, &b) else {
                    return false;
                };
                match op {
                    CmpOp::Eq => ord == Ordering::Equal,
                    CmpOp::Ne => ord != Ordering::Equal,
                    CmpOp::Lt => ord == Ordering::Less,
                    CmpOp::Le => ord != Ordering::Greater,
                    CmpOp::Gt => ord == Ordering::Greater,
                    CmpOp::Ge => ord != Ordering::Less,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn host(pairs: &[(&str, Value)]) -> impl Fn(&str) -> Option<Value> {
        let m: BTreeMap<String, Value> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        move |k: &str| m.get(k).cloned()
    }

    fn q(v: Value) -> Query {
        parse("q", &v).unwrap().unwrap()
    }

    #[test]
    fn numbers_compare_as_numbers() {
        let h = host(&[("vcpus", json!(10)), ("gpus", json!("10"))]);
        assert!(q(json!([">", "$vcpus", "9"])).matches(&h));
        assert!(q(json!([">", "$gpus", "9"])).matches(&h));
        assert!(q(json!([">=", "$gpus", 10])).matches(&h));
        assert!(!q(json!(["<", "$gpus", "9"])).matches(&h));
        assert!(q(json!(["==", "$gpus", "10.0"])).matches(&h));
    }

    #[test]
    fn text_compares_as_text() {
        let h = host(&[("zone", json!("b")), ("gpu", json!("True"))]);
        assert!(q(json!(["=", "$zone", "b"])).matches(&h));
        assert!(q(json!([">", "$zone", "a"])).matches(&h));
        assert!(q(json!(["=", "$gpu", true])).matches(&h));
        assert!(q(json!(["in", "$zone", "a", "b"])).matches(&h));
        assert!(!q(json!(["in", "$zone", "c"])).matches(&h));
    }

    #[test]
    fn logic_and_missing_properties() {
        let h = host(&[("vcpus", json!(4)), ("memory_mb", json!(8192))]);
        assert!(q(json!(["and", [">=", "$vcpus", 4], ["<", "$memory_mb", 10000]])).matches(&h));
        assert!(q(json!(["or", ["=", "$missing", 1], ["=", "$vcpus", 4]])).matches(&h));
        assert!(!q(json!(["=", "$missing", 1])).matches(&h));
        assert!(q(json!(["not", ["=", "$missing", 1]])).matches(&h));
    }

    #[test]
    fn blazar_strings_and_empties() {
        assert_eq!(parse("q", &json!("")).unwrap(), None);
        assert_eq!(parse("q", &json!([])).unwrap(), None);
        assert_eq!(parse("q", &Value::Null).unwrap(), None);
        let parsed = parse("q", &json!("[\">=\", \"$vcpus\", \"2\"]")).unwrap().unwrap();
        assert!(parsed.matches(&host(&[("vcpus", json!(2))])));
    }

    #[test]
    fn malformed_queries_are_refused() {
        for bad in [
            json!("not json"),
            json!(["~", "$a", 1]),
            json!(["=", "$a"]),
            json!(["and"]),
            json!(["not", ["=", "$a", 1], ["=", "$b", 1]]),
            json!([1, 2]),
            json!({"a": 1}),
            json!(["=", "$a", [1]]),
            json!("\"x\""),
        ] {
            assert!(parse("q", &bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn required_texts_are_held_by_every_host_that_matches() {
        let required = |v: Value| q(v).required_texts();
        assert_eq!(required(json!(["==", "$rack", "r7"])), BTreeMap::from([("rack".into(), "r7".into())]));
        let both = required(json!(["and", ["=", "r7", "$rack"], ["==", "$zone", "b"], [">", "$vcpus", 2]]));
        assert_eq!(both, BTreeMap::from([("rack".into(), "r7".into()), ("zone".into(), "b".into())]));
        // Numbers, booleans and anything under `or` or `not` require no text.
        for none in [
            json!(["==", "$n", "10"]),
            json!(["==", "$gpu", "True"]),
            json!(["==", "$n", 10]),
            json!(["or", ["==", "$rack", "r7"], ["==", "$rack", "r8"]]),
            json!(["not", ["==", "$rack", "r7"]]),
            json!(["!=", "$rack", "r7"]),
        ] {
            assert!(required(none.clone()).is_empty(), "{none} requires no text");
        }
        // Every value a host may hold: those that match hold the texts.
        let values = [json!("r7"), json!(" r7"), json!("R7"), json!(7), json!("7"), json!(true), json!(["r7"])];
        for v in values {
            let h = host(&[("rack", v.clone())]);
            let query = q(json!(["==", "$rack", "r7"]));
            assert_eq!(query.matches(&h), v == json!("r7"), "{v}");
        }
    }
}
