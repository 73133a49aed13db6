//! The query string of `GET /allocation_candidates` read as a search's
//! request: its request groups and request-wide parameters, with
//! Placement's checks and words for each (by microversion).

use std::collections::{BTreeMap, BTreeSet};

use axum::http::StatusCode;
use berth_app::placement::candidates::{CandidateGroup, CandidateRequest};
use berth_core::error::ErrorCode;
use regex::Regex;

use super::http::{bad_request, err, Query};
use super::microversion::Version;
use super::{params, schemas};
use crate::error::ApiError;

/// A 400 with one of Placement's query codes.
fn query_error(code: ErrorCode, detail: impl Into<String>) -> ApiError {
    let mut e = err(StatusCode::BAD_REQUEST, detail);
    e.code = code;
    e
}

/// The request groups and request-wide parameters of the query.
pub(super) fn request(q: &Query, v: Version) -> Result<CandidateRequest, ApiError> {
    let pattern = Regex::new(&schemas::group_key_pattern(v)).expect("a valid pattern");
    let mut groups: BTreeMap<String, CandidateGroup> = BTreeMap::new();
    let keys: BTreeSet<&str> = q.pairs.iter().map(|(k, _)| k.as_str()).collect();
    for key in keys {
        let Some(m) = pattern.captures(key) else { continue };
        let kind = m.get(1).map(|x| x.as_str()).unwrap_or_default();
        let suffix = m.get(2).map(|x| x.as_str()).unwrap_or_default().to_string();
        let g = groups.entry(suffix.clone()).or_insert_with(|| CandidateGroup { suffix, ..Default::default() });
        match kind {
            "resources" => g.resources = params::resources(q.get(key).unwrap_or_default())?,
            "required" => {
                let t = params::required(q, key, v)?.unwrap_or_default();
                g.required = t.required;
                g.forbidden = t.forbidden;
            }
            "member_of" => {
                let m = params::member_of(q, key, v)?;
                g.member_of = m.any_of;
                g.forbidden_aggregates = m.forbidden;
            }
            _ => g.in_tree = Some(params::in_tree(q.get(key).unwrap_or_default())?),
        }
    }
    let mut same_subtrees = Vec::new();
    for value in q.all("same_subtree") {
        let set: BTreeSet<String> = value.split(',').map(|s| s.trim().to_string()).collect();
        if set.contains("") {
            return Err(query_error(
                ErrorCode::QueryBadValue,
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
            ));
        }
        same_subtrees.push(set);
    }
    check_groups(&groups, &same_subtrees, v)?;
    if v.forbidden_traits() {
        check_trait_conflicts(&groups)?;
    }
    let group_policy = q.all("group_policy").first().map(|s| s.to_string());
    if group_policy.is_none() && groups.keys().filter(|s| !s.is_empty()).count() > 1 {
        return Err(bad_request(
            "The \"group_policy\" parameter is required when specifying more than one \"resources{N}\" parameter.",
        ));
    }
    let limit = match q.all("limit").first() {
        Some(l) => Some(l.parse::<usize>().map_err(|_| bad_request(format!("Invalid limit: {l}")))?),
        None => None,
    };
    let (root_required, root_forbidden) = root_traits(q, v)?;
    Ok(CandidateRequest {
        groups: groups.into_values().collect(),
        isolate: group_policy.as_deref() == Some("isolate"),
        limit,
        root_required,
        root_forbidden,
        same_subtrees,
        nested: v.candidates_nested(),
        all_classes_in_summaries: v.summaries_all_classes(),
    })
}

/// A group that requires a trait it also forbids is a 400 naming each.
fn check_trait_conflicts(groups: &BTreeMap<String, CandidateGroup>) -> Result<(), ApiError> {
    let mut conflicts: Vec<String> = Vec::new();
    for g in groups.values() {
        for any in &g.required {
            if any.iter().all(|t| g.forbidden.contains(t)) {
                let list: Vec<&str> = any.iter().map(String::as_str).collect();
                conflicts.push(format!("required{}: ({})", g.suffix, list.join(", ")));
            }
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    conflicts.sort();
    Err(bad_request(format!(
        "Conflicting required and forbidden traits found in the following traits keys: {}",
        conflicts.join(", ")
    )))
}

/// `root_required`, given at most once: the traits the root provider must
/// have and must not have.
fn root_traits(q: &Query, v: Version) -> Result<(BTreeSet<String>, BTreeSet<String>), ApiError> {
    let roots = q.all("root_required");
    if roots.len() > 1 {
        return Err(query_error(
            ErrorCode::QueryDuplicateKey,
            "Query parameter 'root_required' may be specified only once.",
        ));
    }
    let Some(value) = roots.first() else { return Ok((BTreeSet::new(), BTreeSet::new())) };
    let t = params::required(&Query { pairs: vec![("r".into(), value.to_string())] }, "r", v)?.unwrap_or_default();
    let root_required: BTreeSet<String> = t.required.into_iter().flatten().collect();
    let root_forbidden = t.forbidden;
    let both: Vec<&String> = root_required.intersection(&root_forbidden).collect();
    if !both.is_empty() {
        let list: Vec<&str> = both.iter().map(|s| s.as_str()).collect();
        return Err(query_error(
            ErrorCode::QueryBadValue,
            format!("Conflicting required and forbidden traits found in root_required: {}", list.join(", ")),
        ));
    }
    Ok((root_required, root_forbidden))
}

/// Placement's rules on which groups may go without resources.
fn check_groups(
    groups: &BTreeMap<String, CandidateGroup>,
    same_subtrees: &[BTreeSet<String>],
    v: Version,
) -> Result<(), ApiError> {
    if v.same_subtree() {
        let resourceless: Vec<&String> =
            groups.iter().filter(|(_, g)| g.resources.is_empty()).map(|(s, _)| s).collect();
        if resourceless.len() == groups.len() {
            return Err(query_error(
                ErrorCode::QueryMissingValue,
                "There must be at least one resources or resources[$S] parameter.",
            ));
        }
        let in_subtree: BTreeSet<&String> = same_subtrees.iter().flatten().collect();
        let bad: Vec<&str> = resourceless.iter().filter(|s| !in_subtree.contains(*s)).map(|s| s.as_str()).collect();
        if !bad.is_empty() {
            return Err(query_error(
                ErrorCode::QueryBadValue,
                format!(
                    "Resourceless suffixed group request should be specified in `same_subtree` query param: \
                     bad group(s) - {bad:?}."
                ),
            ));
        }
        let missing: Vec<&str> = in_subtree.iter().filter(|s| !groups.contains_key(**s)).map(|s| s.as_str()).collect();
        if !missing.is_empty() {
            let all: Vec<&str> = groups.keys().map(String::as_str).collect();
            return Err(query_error(
                ErrorCode::QueryBadValue,
                format!("Real suffixes should be specified in `same_subtree`: {missing:?} not found in {all:?}."),
            ));
        }
        return Ok(());
    }
    let orphans = |f: &dyn Fn(&CandidateGroup) -> bool, key: &str| -> Vec<String> {
        groups.values().filter(|g| g.resources.is_empty() && f(g)).map(|g| format!("{key}{}", g.suffix)).collect()
    };
    let traits = orphans(&|g| !g.required.is_empty() || !g.forbidden.is_empty(), "required");
    if !traits.is_empty() {
        return Err(bad_request(format!(
            "All traits parameters must be associated with resources.  Found the following orphaned traits keys: {}",
            traits.join(", ")
        )));
    }
    let members = orphans(&|g| !g.member_of.is_empty() || !g.forbidden_aggregates.is_empty(), "member_of");
    if !members.is_empty() {
        return Err(bad_request(format!(
            "All member_of parameters must be associated with resources. Found the following orphaned member_of \
             keys: {}",
            members.join(", ")
        )));
    }
    if groups.values().any(|g| g.resources.is_empty()) {
        return Err(bad_request("All request groups must specify resources."));
    }
    if groups.is_empty() {
        return Err(bad_request("At least one request group (`resources` or `resources{$S}`) is required."));
    }
    Ok(())
}

/// Fuzz target: Placement's granular query parameters, as the handler reads
/// them before the store is asked, bounded to a fixed number of cases.
#[cfg(test)]
mod fuzz {
    use super::super::microversion::{negotiate, MAX};
    use super::*;
    use proptest::prelude::*;

    /// `key=value` pairs of the parameters Placement knows, with suffixes,
    /// and of anything else.
    fn query() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            prop::sample::select(vec![
                "resources",
                "required",
                "member_of",
                "in_tree",
                "group_policy",
                "limit",
                "root_required",
                "same_subtree",
            ])
            .prop_flat_map(|k| prop_oneof![
                Just(String::new()),
                "[0-9]{1,3}",
                "_[A-Za-z0-9_-]{0,8}",
                "[^&=]{0,3}"
            ]
            .prop_map(move |suffix| format!("{k}{suffix}"))),
            "[^&=]{0,10}",
        ];
        let value = prop_oneof![
            "(([A-Z_]{1,10}|VCPU|MEMORY_MB|CUSTOM_[A-Z]{0,3}):-?[0-9]{0,20},?){0,4}",
            "(in:)?(!?([A-Z_]{1,10}|CUSTOM_X|[0-9a-f-]{36})[,]?){0,4}",
            "(none|isolate|[0-9]{0,25}|-1|_[a-z0-9]{0,3}(,_[a-z0-9]{0,3}){0,2})",
            any::<String>(),
        ];
        let anything = prop::collection::vec((key, value), 0..8);
        // Mostly valid: request groups with resources, traits and
        // aggregates, and the request-wide parameters.
        let group = (
            prop_oneof![Just(String::new()), "[0-9]{1,2}", "_[A-Z0-9]{1,4}"],
            "(VCPU|MEMORY_MB|DISK_GB|CUSTOM_[A-Z]{1,3}):[0-9]{1,4}(,(VCPU|DISK_GB):[0-9]{1,3})?",
            prop::option::of("!?(HW_CPU_X86_AVX2|CUSTOM_[A-Z]{1,3})(,!?CUSTOM_[A-Z]{1,3})?"),
            prop::option::of("(in:)?[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}"),
        );
        let usual = (
            prop::collection::vec(group, 1..4),
            prop::option::of(prop::sample::select(vec!["none", "isolate"])),
            prop::option::of(1u32..50),
        )
            .prop_map(|(groups, policy, limit)| {
                let mut pairs = Vec::new();
                for (suffix, resources, required, member_of) in groups {
                    pairs.push((format!("resources{suffix}"), resources));
                    if let Some(r) = required {
                        pairs.push((format!("required{suffix}"), r));
                    }
                    if let Some(m) = member_of {
                        pairs.push((format!("member_of{suffix}"), m));
                    }
                }
                if let Some(p) = policy {
                    pairs.push(("group_policy".to_string(), p.to_string()));
                }
                if let Some(l) = limit {
                    pairs.push(("limit".to_string(), l.to_string()));
                }
                pairs
            });
        prop_oneof![anything, usual].prop_map(|pairs| {
            let mut out = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &pairs {
                out.append_pair(k, v);
            }
            out.finish()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, max_shrink_time: 10_000, ..ProptestConfig::default() })]

        #[test]
        fn any_candidates_query_is_read_or_refused_with_a_400(raw in query(), minor in 10u32..=MAX.minor) {
            let v = negotiate(Some(&format!("placement 1.{minor}"))).unwrap();
            let q = Query::parse(Some(&raw));
            let read = q.validate(&schemas::candidates(v)).and_then(|_| request(&q, v));
            if let Err(e) = read {
                prop_assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}: {}", raw, e.detail);
            }
        }
    }
}
