//! Fuzz targets for the parsers of what clients type: dates, durations and
//! Blazar's property query language. Property tests rather than cargo-fuzz
//! (which needs a nightly toolchain CI does not have), each bounded to a
//! fixed number of cases so that `make test` runs them in seconds.

use berth_core::dates::{format_date, parse_date, parse_duration, DateSpec};
use berth_core::error::ErrorKind;
use berth_core::query;
use berth_core::time;
use proptest::prelude::*;
use serde_json::{json, Value};

fn bounded() -> ProptestConfig {
    ProptestConfig { cases: 2000, max_shrink_time: 10_000, ..ProptestConfig::default() }
}

/// Text shaped like a date more often than chance would make it.
fn date_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[+-]?[0-9]{1,7}-[0-9]{1,3}-[0-9]{1,3}[ Tt][0-9]{1,3}:[0-9]{1,3}(:[0-9]{1,3}(\\.[0-9]{0,10})?)?(Z|[+-][0-9]{2}:[0-9]{2})?",
        (1i32..=9999, 1u32..=12, 1u32..=31, 0u32..24, 0u32..60)
            .prop_map(|(y, m, d, h, min)| format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}")),
        Just(" now ".to_string()),
    ]
}

/// Any JSON a client might send as a property query: operators, property
/// names, literals, nested lists, and the same as a string holding JSON.
fn query_like() -> impl Strategy<Value = Value> {
    let op = prop::sample::select(vec!["=", "==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "in", "like"]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        op.prop_map(Value::from),
        "\\$?[a-z_.]{0,8}".prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    let tree = leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z$]{0,3}", inner, 0..3).prop_map(|m| json!(m)),
        ]
    });
    prop_oneof![tree.clone(), tree.prop_map(|v| Value::String(v.to_string()))]
}

proptest! {
    #![proptest_config(bounded())]

    #[test]
    fn a_date_is_read_within_years_1_to_9999_or_refused(s in date_like()) {
        match parse_date("start_date", &s) {
            Ok(DateSpec::At(t)) => {
                prop_assert!(time::in_range(t), "{s:?} read as {t}");
                prop_assert_eq!(parse_date("start_date", &format_date(t)).unwrap(), DateSpec::At(t));
            }
            Ok(DateSpec::Now) => prop_assert!(s.trim().eq_ignore_ascii_case("now")),
            Err(e) => prop_assert_eq!(e.kind, ErrorKind::Invalid),
        }
    }

    #[test]
    fn a_duration_is_read_with_its_unit_or_refused(
        s in prop_oneof![any::<String>(), "[+-]?[0-9]{0,22} ?(s|sec|m|min|h|d|w|y|)"]
    ) {
        match parse_duration("duration", &s) {
            Ok(d) => {
                prop_assert!(d >= chrono::Duration::zero(), "{s:?} read as {d}");
                prop_assert!(s.trim().ends_with(|c: char| c.is_ascii_alphabetic()), "{s:?} read with no unit");
            }
            Err(e) => prop_assert_eq!(e.kind, ErrorKind::Invalid),
        }
    }

    #[test]
    fn a_property_query_is_read_and_matched_or_refused(
        v in query_like(),
        props in prop::collection::btree_map("[a-z_.]{0,8}", query_like(), 0..4),
    ) {
        match query::parse("resource_properties", &v) {
            Ok(Some(q)) => {
                let _ = q.matches(&|name: &str| props.get(name).cloned());
            }
            Ok(None) => {}
            Err(e) => prop_assert_eq!(e.kind, ErrorKind::Invalid),
        }
    }
}
