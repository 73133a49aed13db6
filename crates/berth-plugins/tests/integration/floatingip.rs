//! The example external plugin (`examples/plugins/floatingip`) run through the
//! `external` plugin over the exec protocol: validate and the hooks, each key
//! applied once.

use std::path::{Path, PathBuf};

use berth_core::error::ErrorKind;
use berth_plugins::{Hook, PluginsConfig, ResourcePlugin, ResourceRequest};
use serde_json::{json, Value};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/plugins/floatingip/floatingip.py")
        .canonicalize()
        .unwrap()
}

/// The plugin as berthd builds it from its `[plugins]` section.
fn plugin(state: &Path) -> std::sync::Arc<dyn ResourcePlugin> {
    let config: PluginsConfig = serde_json::from_value(json!({
        "enabled": ["virtual:floatingip"],
        "external": {"virtual:floatingip": {
            "driver": "exec",
            "program": script(),
            "env": {"FLOATINGIP_STATE": state, "FLOATINGIP_POOL": "203.0.113.10-203.0.113.14"},
            "timeout_ms": 30000
        }}
    }))
    .unwrap();
    config.registry(vec![]).unwrap().get("virtual:floatingip").unwrap()
}

fn hook(event_type: &str, key: &str, reservation_id: &str, amount: u32) -> Hook {
    Hook {
        event_type: event_type.into(),
        idempotency_key: key.into(),
        attempt: 1,
        lease: json!({"id": "lease-1", "name": "l", "project_id": "p"}),
        reservation: json!({"id": reservation_id, "resource_type": "virtual:floatingip", "amount": amount}),
        allocations: vec![],
    }
}

fn state(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn effects(path: &Path, action: &str, reservation_id: &str) -> usize {
    state(path)["effects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == action && e["reservation_id"] == reservation_id)
        .count()
}

#[tokio::test]
async fn validate_answers_nothing_for_a_good_amount_and_refuses_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = plugin(&dir.path().join("state.json"));
    assert_eq!(p.resource_type(), "virtual:floatingip");
    let ok = p.validate(&json!({"resource_type": "virtual:floatingip", "amount": 5})).await.unwrap();
    assert_eq!(ok, ResourceRequest::Nothing);
    for bad in [json!(0), json!(6), json!("2"), json!(1.5), json!(true), Value::Null] {
        let err = p.validate(&json!({"resource_type": "virtual:floatingip", "amount": bad})).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{bad}: {err}");
        assert!(err.detail.contains("amount: must be a whole number from 1 to 5"), "{err}");
    }
    assert!(!dir.path().join("state.json").exists(), "validate changes nothing");
}

#[tokio::test]
async fn hooks_allocate_and_release_addresses_once_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let p = plugin(&path);

    let start = hook("start_lease", "ev-start-1", "r-1", 2);
    let first = p.on_start(&start).await.unwrap();
    assert_eq!(first.detail, json!({"reservation_id": "r-1", "addresses": ["203.0.113.10", "203.0.113.11"]}));
    // The same event again (a retry after a lost answer, another daemon):
    // the same answer, and nothing applied twice.
    let again = p.on_start(&Hook { attempt: 2, ..start.clone() }).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(effects(&path, "on_start", "r-1"), 1);
    assert_eq!(state(&path)["allocations"]["r-1"], json!(["203.0.113.10", "203.0.113.11"]));

    // Three more fill the pool of five; a sixth address is not there yet.
    p.on_start(&hook("start_lease", "ev-start-2", "r-2", 3)).await.unwrap();
    let full = p.on_start(&hook("start_lease", "ev-start-3", "r-3", 1)).await.unwrap_err();
    assert!(!full.permanent, "may succeed once another lease ends: {full:?}");
    assert!(full.message.starts_with("pool exhausted"), "{full:?}");

    let notice = p.before_end(&hook("before_end_lease", "ev-before-1", "r-1", 2)).await.unwrap();
    assert_eq!(notice.detail["notified"], json!(["203.0.113.10", "203.0.113.11"]));

    let end = hook("end_lease", "ev-end-1", "r-1", 2);
    let released = p.on_end(&end).await.unwrap();
    assert_eq!(released.detail["released"], json!(["203.0.113.10", "203.0.113.11"]));
    assert_eq!(p.on_end(&end).await.unwrap(), released, "the same key answers the same");
    assert_eq!(effects(&path, "on_end", "r-1"), 1);
    assert!(state(&path)["allocations"].get("r-1").is_none());

    // The failed start, retried with its own key, now finds addresses.
    let retried = p.on_start(&hook("start_lease", "ev-start-3", "r-3", 1)).await.unwrap();
    assert_eq!(retried.detail["addresses"], json!(["203.0.113.10"]));

    // An update resizes the reservation's addresses.
    let grown = p.on_update(&hook("update_lease", "ev-update-1", "r-3", 2)).await.unwrap();
    assert_eq!(grown.detail["addresses"], json!(["203.0.113.10", "203.0.113.11"]));
}

#[tokio::test]
async fn concurrent_calls_with_one_key_apply_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let p = plugin(&path);
    let start = hook("start_lease", "ev-start-9", "r-9", 2);
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let p = p.clone();
            let h = start.clone();
            tokio::spawn(async move { p.on_start(&h).await.unwrap() })
        })
        .collect();
    let mut answers = Vec::new();
    for c in calls {
        answers.push(c.await.unwrap());
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    assert_eq!(effects(&path, "on_start", "r-9"), 1);
}
