//! An operator's policy file: oslo.policy's YAML, a mapping of rule names
//! to expressions. Each name must be a rule the service has and each
//! expression must parse; the first that is not is reported with its line.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, Visitor};

use crate::rule::Rule;

/// Why a policy file was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// 1-based, when the problem is at one place in the file.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The file's rules in order. The YAML parser marks an error raised while
/// reading a key or a value with where that key or value is.
pub(crate) fn read(yaml: &str, known: &dyn Fn(&str) -> bool) -> Result<Vec<(String, Rule)>, FileError> {
    let de = serde_norway::Deserializer::from_str(yaml);
    match (Rules { known }).deserialize(de) {
        Ok(rules) => Ok(rules),
        // An empty document (or one of comments only) overrides nothing.
        Err(e) if yaml.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) => {
            let _ = e;
            Ok(Vec::new())
        }
        Err(e) => {
            let line = e.location().map(|l| l.line());
            let mut message = e.to_string();
            // The parser appends its own "at line N column M"; the line is kept apart.
            if let Some(at) = message.find(" at line ") {
                message.truncate(at);
            }
            Err(FileError { line, message })
        }
    }
}

struct Rules<'k> {
    known: &'k dyn Fn(&str) -> bool,
}

impl<'de> DeserializeSeed<'de> for Rules<'_> {
    type Value = Vec<(String, Rule)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Rules<'_> {
    type Value = Vec<(String, Rule)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping of rule names to rules, e.g. \"blazar:leases:create\": \"role:member\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        while let Some(name) = map.next_key_seed(Name { known: self.known })? {
            if !seen.insert(name.clone()) {
                return Err(A::Error::custom(format!("rule {name:?} is given twice")));
            }
            let rule = map.next_value_seed(Expression)?;
            out.push((name, rule));
        }
        Ok(out)
    }
}

/// Keys and values are checked inside the parser's visit of the scalar, so
/// that an error carries the scalar's own line.
struct Name<'k> {
    known: &'k dyn Fn(&str) -> bool,
}

impl<'de> DeserializeSeed<'de> for Name<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Name<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a rule name")
    }
    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<String, E> {
        if (self.known)(name) {
            Ok(name.to_string())
        } else {
            Err(E::custom(format!("unknown rule {name:?} (`berthd policy list` shows every rule)")))
        }
    }
}

struct Expression;

impl<'de> DeserializeSeed<'de> for Expression {
    type Value = Rule;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Rule, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Expression {
    type Value = Rule;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a rule expression (a string)")
    }
    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Rule, E> {
        Rule::parse(text).map_err(|e| E::custom(e.0))
    }
}
