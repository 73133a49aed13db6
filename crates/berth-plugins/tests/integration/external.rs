//! An external resource type served by a web service: validate's answers
//! mapped to resource requests and errors, hooks carrying the lease event's
//! key, all against a real HTTP server on the loopback.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use berth_core::error::ErrorKind;
use berth_plugins::driver::Envelope;
use berth_plugins::{DriverConfig, ExternalPlugin, Hook, ResourcePlugin, ResourceRequest};
use serde_json::{json, Value};

#[derive(Default)]
struct Service {
    calls: Mutex<Vec<(String, Envelope)>>,
    replies: Mutex<VecDeque<(u16, Value)>>,
}

async fn serve(
    State(s): State<Arc<Service>>,
    headers: HeaderMap,
    Json(e): Json<Envelope>,
) -> (StatusCode, Json<Value>) {
    let key = headers.get("idempotency-key").unwrap().to_str().unwrap().to_string();
    s.calls.lock().unwrap().push((key, e));
    let (code, body) = s.replies.lock().unwrap().pop_front().unwrap_or((200, json!({"done": true})));
    (StatusCode::from_u16(code).unwrap(), Json(body))
}

async fn plugin(replies: Vec<(u16, Value)>) -> (Arc<Service>, ExternalPlugin) {
    let s = Arc::new(Service { calls: Mutex::default(), replies: Mutex::new(replies.into()) });
    let app = Router::new().route("/", post(serve)).with_state(s.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config: DriverConfig =
        serde_json::from_value(json!({"driver": "webhook", "url": url, "secret": "s", "timeout_ms": 5000})).unwrap();
    (s, ExternalPlugin::from_config("virtual:gpu", &config).unwrap())
}

#[tokio::test]
async fn validate_turns_the_answer_into_a_resource_request() {
    let slots = json!({"kind": "slots", "amount": 2, "resources": {"CUSTOM_GPU": 1},
                       "affinity": null, "resource_properties": null});
    let (s, p) = plugin(vec![(200, slots)]).await;
    let reservation = json!({"resource_type": "virtual:gpu", "amount": 2});
    let request = p.validate(&reservation).await.unwrap();
    assert_eq!(
        request,
        ResourceRequest::Slots {
            amount: 2,
            resources: [("CUSTOM_GPU".to_string(), 1)].into(),
            affinity: None,
            resource_properties: None,
            traits: Default::default(),
        }
    );
    let calls = s.calls.lock().unwrap();
    assert_eq!(calls[0].1.action, "validate");
    assert_eq!(calls[0].1.payload, json!({"resource_type": "virtual:gpu", "reservation": reservation}));
}

#[tokio::test]
async fn a_refusal_is_invalid_input_with_the_services_reason() {
    let (s, p) = plugin(vec![(422, json!({"error": "amount: at most 8 GPUs"}))]).await;
    let err = p.validate(&json!({"amount": 9})).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(err.detail.starts_with("virtual:gpu rejected the reservation: amount: at most 8 GPUs"), "{err}");
    assert_eq!(s.calls.lock().unwrap().len(), 1, "a refusal is not asked again");
}

#[tokio::test]
async fn a_passing_failure_is_asked_again_with_the_same_key_then_reported_as_ours() {
    let (s, p) = plugin(vec![(503, json!({"error": "starting"})), (200, json!({"kind": "nothing"}))]).await;
    assert_eq!(p.validate(&json!({})).await.unwrap(), ResourceRequest::Nothing);
    {
        let calls = s.calls.lock().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].0, calls[1].0);
    }

    let (_s, p) = plugin(vec![(503, json!({"error": "down"})), (503, json!({"error": "down"}))]).await;
    let err = p.validate(&json!({})).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal, "the service's outage is not the client's bad input");
}

#[tokio::test]
async fn an_answer_that_is_not_a_resource_request_is_a_plugin_fault() {
    let (_s, p) = plugin(vec![(200, json!({"kind": "hosts", "min": "one"}))]).await;
    let err = p.validate(&json!({})).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(err.detail.contains("needs \"max\""), "{err}");
    // A misspelt key is refused by name, not read as "no affinity".
    let answer = json!({"kind": "slots", "amount": 1, "resources": {"CUSTOM_GPU": 1}, "afinity": true});
    let (_s, p) = plugin(vec![(200, answer)]).await;
    let err = p.validate(&json!({})).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.detail.starts_with("the virtual:gpu plugin answered validate with something that is not a resource request: a \"slots\" answer has no key \"afinity\""),
        "{err}"
    );
}

/// What Berth sends has exactly the keys the published schema gives each
/// payload.
#[tokio::test]
async fn payloads_have_the_schemas_keys() {
    let (s, p) = plugin(vec![(200, json!({"kind": "nothing"}))]).await;
    p.validate(&json!({"amount": 1})).await.unwrap();
    let hook = Hook {
        event_type: "start_lease".into(),
        idempotency_key: "k".into(),
        attempt: 1,
        lease: json!({"id": "lease-1"}),
        reservation: json!({"id": "r-1"}),
        allocations: vec![],
    };
    p.on_start(&hook).await.unwrap();
    let defs = &berth_plugins::protocol::schema()["$defs"];
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let calls = s.calls.lock().unwrap();
    assert_eq!(keys(&serde_json::to_value(&calls[0].1).unwrap()), keys(&defs["envelope"]["properties"]));
    assert_eq!(keys(&calls[0].1.payload), keys(&defs["validate_payload"]["properties"]));
    assert_eq!(keys(&calls[1].1.payload), keys(&defs["hook_payload"]["properties"]));
    let mut required: Vec<String> =
        defs["hook_payload"]["required"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
    required.sort();
    assert_eq!(keys(&calls[1].1.payload), required);
}

#[tokio::test]
async fn hooks_send_the_hook_with_its_key_and_classify_failures() {
    let (s, p) = plugin(vec![(200, json!({"attached": 1})), (500, json!({})), (404, json!({"error": "gone"}))]).await;
    let hook = Hook {
        event_type: "start_lease".into(),
        idempotency_key: "lease-1/start_lease".into(),
        attempt: 1,
        lease: json!({"id": "lease-1"}),
        reservation: json!({"id": "r-1", "resource_type": "virtual:gpu"}),
        allocations: vec![json!({"resource_provider": {"uuid": "p-1"}, "resources": {"CUSTOM_GPU": 1}})],
    };
    assert_eq!(p.on_start(&hook).await.unwrap().detail, json!({"attached": 1}));
    assert!(!p.before_end(&hook).await.unwrap_err().permanent);
    assert!(p.on_end(&hook).await.unwrap_err().permanent);
    assert_eq!(p.on_update(&hook).await.unwrap().detail, json!({"done": true}));

    let calls = s.calls.lock().unwrap();
    let actions: Vec<&str> = calls.iter().map(|(_, e)| e.action.as_str()).collect();
    assert_eq!(actions, ["on_start", "before_end", "on_end", "on_update"]);
    for (key, e) in calls.iter() {
        assert_eq!(key, "lease-1/start_lease");
        assert_eq!(e.idempotency_key, "lease-1/start_lease");
        assert_eq!(e.payload["resource_type"], "virtual:gpu");
        assert_eq!(e.payload["reservation"]["id"], "r-1");
        assert_eq!(e.payload["allocations"][0]["resources"]["CUSTOM_GPU"], 1);
        assert_eq!(e.payload["event_type"], "start_lease");
    }
}
