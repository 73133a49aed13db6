//! Placement's query-string vocabulary: `resources`, `required` (traits,
//! forbidden traits, `in:` any-of), `member_of` (aggregates, `in:`,
//! forbidden), `in_tree`.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::http::{bad_request, Query};
use super::microversion::Version;
use crate::error::ApiError;

/// `VCPU:2,MEMORY_MB:1024` into amounts by class.
pub fn resources(value: &str) -> Result<BTreeMap<String, i64>, ApiError> {
    let form = "Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024.";
    if value.trim().is_empty() {
        return Err(bad_request(format!("Badly formed resources parameter. {form} Got: empty string.")));
    }
    let mut out = BTreeMap::new();
    for item in value.split(',') {
        let Some((class, amount)) = item.split_once(':').filter(|(_, a)| !a.contains(':')) else {
            return Err(bad_request(format!("Badly formed resources parameter. {form} Got: {item}.")));
        };
        let amount: i64 = amount.trim().parse().map_err(|_| {
            bad_request(format!("Requested resource {class} expected positive integer amount. Got: {amount}."))
        })?;
        if amount < 1 {
            return Err(bad_request(format!("Requested resource {class} requires amount >= 1. Got: {amount}.")));
        }
        out.insert(class.to_string(), amount);
    }
    Ok(out)
}

/// Required traits: each set is "any of"; and the forbidden ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traits {
    pub required: Vec<BTreeSet<String>>,
    pub forbidden: BTreeSet<String>,
}

/// One `required` value.
fn required_one(value: &str, v: Version) -> Result<Traits, ApiError> {
    let bad = |m: String| bad_request(format!("Invalid query string parameters: {m}"));
    if let Some(list) = value.strip_prefix("in:") {
        if !v.any_traits() {
            return Err(bad(format!(
                "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: {value}"
            )));
        }
        let any: BTreeSet<String> = list.split(',').map(|t| t.trim().to_string()).collect();
        if any.iter().any(String::is_empty) {
            return Err(bad(format!(
                "Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. \
                 Got an empty trait in: {value}"
            )));
        }
        if any.iter().any(|t| t.starts_with('!')) {
            return Err(bad(format!(
                "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: {value}"
            )));
        }
        return Ok(Traits { required: vec![any], forbidden: BTreeSet::new() });
    }
    let expected = if v.forbidden_traits() { "HW_CPU_X86_VMX,!CUSTOM_MAGIC" } else { "HW_CPU_X86_VMX,CUSTOM_MAGIC" };
    let all: Vec<&str> = value.split(',').map(str::trim).collect();
    if all.iter().any(|t| t.is_empty() || *t == "!") {
        return Err(bad(format!(
            "Expected 'required' parameter value of the form: {expected}. Got an empty trait in: {value}"
        )));
    }
    let mut out = Traits::default();
    for t in all {
        match t.strip_prefix('!') {
            Some(f) => {
                if !v.forbidden_traits() {
                    return Err(bad(format!(
                        "Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
                    )));
                }
                out.forbidden.insert(f.to_string());
            }
            None => out.required.push(BTreeSet::from([t.to_string()])),
        }
    }
    Ok(out)
}

/// Every `required{suffix}` of the query (before 1.39 only the last counts).
pub fn required(q: &Query, key: &str, v: Version) -> Result<Option<Traits>, ApiError> {
    let mut values = q.all(key);
    if values.is_empty() {
        return Ok(None);
    }
    if !v.any_traits() {
        values = values.split_off(values.len() - 1);
    }
    let mut out = Traits::default();
    for value in values {
        let t = required_one(value, v)?;
        out.required.extend(t.required);
        out.forbidden.extend(t.forbidden);
    }
    Ok(Some(out))
}

/// Aggregate membership: each set is "in one of"; and the forbidden ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberOf {
    pub any_of: Vec<BTreeSet<Uuid>>,
    pub forbidden: BTreeSet<Uuid>,
}

/// Every `member_of{suffix}` of the query.
pub fn member_of(q: &Query, key: &str, v: Version) -> Result<MemberOf, ApiError> {
    let values = q.all(key);
    if !v.multiple_member_of() && values.len() > 1 {
        return Err(bad_request(format!("Multiple {key} parameters are not supported")));
    }
    let mut out = MemberOf::default();
    for value in values {
        if value.contains(',') && !(value.starts_with("in:") || value.starts_with("!in:")) {
            return Err(bad_request(format!(
                "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword \
                 using the valid microversion. Got: {value}"
            )));
        }
        let (forbidden, list) = if let Some(l) = value.strip_prefix("!in:") {
            (true, l)
        } else if let Some(l) = value.strip_prefix('!') {
            (true, l)
        } else if let Some(l) = value.strip_prefix("in:") {
            (false, l)
        } else {
            (false, value)
        };
        let mut set = BTreeSet::new();
        for agg in list.split(',') {
            let u = Uuid::try_parse(agg).map_err(|_| {
                bad_request(format!(
                    "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). \
                     Got: {agg}"
                ))
            })?;
            set.insert(u);
        }
        if forbidden {
            if !v.forbidden_aggregates() {
                return Err(bad_request(format!(
                    "Forbidden {key} parameters are not supported in the specified microversion"
                )));
            }
            out.forbidden.extend(set);
        } else {
            out.any_of.push(set);
        }
    }
    Ok(out)
}

/// `in_tree{suffix}`: a provider UUID.
pub fn in_tree(value: &str) -> Result<Uuid, ApiError> {
    Uuid::try_parse(value.trim()).map_err(|_| {
        bad_request(format!(
            "Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: {value}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::super::microversion::{negotiate, MAX};
    use super::*;

    #[test]
    fn resources_parse_and_refuse() {
        assert_eq!(resources("VCPU:2,DISK_GB:10").unwrap().get("VCPU"), Some(&2));
        for bad in ["", "VCPU", "VCPU:fred", "VCPU:-2", "DISK_GB:500,"] {
            assert!(resources(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn required_forms() {
        let q = Query::parse(Some("required=in:A,B&required=C,!D"));
        let t = required(&q, "required", MAX).unwrap().unwrap();
        assert_eq!(t.required.len(), 2);
        assert!(t.forbidden.contains("D"));
        let old = negotiate(Some("placement 1.21")).unwrap();
        assert!(required(&Query::parse(Some("required=!D")), "required", old).is_err());
        let v138 = negotiate(Some("placement 1.38")).unwrap();
        let t = required(&Query::parse(Some("required=A&required=B")), "required", v138).unwrap().unwrap();
        assert_eq!(t.required, vec![BTreeSet::from(["B".to_string()])]);
    }
}
