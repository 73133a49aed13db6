//! The webhook driver against a real HTTP server on the loopback.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use berth_plugins::driver::{sign, Driver, Envelope, WebhookConfig, WebhookDriver};
use berth_plugins::{DriverConfig, HookError};
use hmac::{KeyInit, Mac};
use serde_json::json;

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
struct Seen {
    headers: HeaderMap,
    body: Bytes,
}

/// What the receiver answers next; when the script runs out, 200 `{"ok":true}`.
enum Reply {
    Status(u16, &'static str),
    Stall,
}

#[derive(Default)]
struct Receiver {
    seen: Mutex<Vec<Seen>>,
    script: Mutex<VecDeque<Reply>>,
}

async fn receive(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    r.seen.lock().unwrap().push(Seen { headers, body });
    let reply = r.script.lock().unwrap().pop_front();
    match reply {
        Some(Reply::Status(code, body)) => (StatusCode::from_u16(code).unwrap(), body.to_string()),
        Some(Reply::Stall) => {
            // Longer than any client timeout in these tests; the server task
            // is dropped with the test.
            tokio::time::sleep(Duration::from_secs(600)).await;
            (StatusCode::OK, "{}".into())
        }
        None => (StatusCode::OK, r#"{"ok":true}"#.into()),
    }
}

async fn receiver(script: Vec<Reply>) -> (Arc<Receiver>, String) {
    let r = Arc::new(Receiver { seen: Mutex::default(), script: Mutex::new(script.into()) });
    let app = Router::new().route("/hook", post(receive)).with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (r, url)
}

fn driver(url: &str, secret: Option<&str>, timeout_ms: u64) -> WebhookDriver {
    WebhookDriver::new(WebhookConfig {
        url: url.to_string(),
        secret: secret.map(str::to_string),
        timeout_ms,
        headers: [("X-Site".to_string(), "north".to_string())].into(),
    })
    .unwrap()
}

fn header<'a>(s: &'a Seen, name: &str) -> Option<&'a str> {
    s.headers.get(name).map(|v| v.to_str().unwrap())
}

/// What a receiver does to check the signature, written independently of
/// the driver's own signing code.
fn verify(secret: &[u8], body: &[u8], header_value: &str) -> bool {
    let Some(hex) = header_value.strip_prefix("sha256=") else { return false };
    let Ok(given) = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
    else {
        return false;
    };
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

#[tokio::test]
async fn a_signed_call_carries_the_key_and_returns_the_answer() {
    let (r, url) = receiver(vec![Reply::Status(200, r#"{"woken":["i-1"]}"#)]).await;
    let d = driver(&url, Some("s3cret"), 5_000);
    let payload = json!({"instance_id": "i-1", "lease": {"id": "l-1"}});
    let out = d.call("wake_up", &payload, "lease-event-42").await.unwrap();
    assert_eq!(out, json!({"woken": ["i-1"]}));

    let seen = r.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(header(s, "idempotency-key"), Some("lease-event-42"));
    assert_eq!(header(s, "x-berth-action"), Some("wake_up"));
    assert_eq!(header(s, "content-type"), Some("application/json"));
    assert_eq!(header(s, "x-site"), Some("north"), "configured headers are sent");
    let envelope: Envelope = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(
        envelope,
        Envelope { action: "wake_up".into(), idempotency_key: "lease-event-42".into(), payload: payload.clone() }
    );
    let signature = header(s, "x-berth-signature").expect("signed");
    assert!(verify(b"s3cret", &s.body, signature), "the signature verifies over the exact body");
    assert!(!verify(b"another secret", &s.body, signature), "and only with the right secret");
    assert_eq!(signature, sign(b"s3cret", &s.body));
}

#[tokio::test]
async fn without_a_secret_no_signature_is_sent_and_an_empty_answer_is_null() {
    let (r, url) = receiver(vec![Reply::Status(204, "")]).await;
    let out = driver(&url, None, 5_000).call("notify", &json!({}), "k").await.unwrap();
    assert_eq!(out, serde_json::Value::Null);
    assert!(header(&r.seen.lock().unwrap()[0], "x-berth-signature").is_none());
}

/// The manager's part, reduced: call again while the failure is retryable.
async fn call_until_settled(d: &dyn Driver, key: &str) -> (Result<serde_json::Value, HookError>, u32) {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match d.call("delete", &json!({"instance_id": "i-9"}), key).await {
            Err(e) if !e.permanent && attempts < 10 => continue,
            other => return (other, attempts),
        }
    }
}

#[tokio::test]
async fn server_errors_are_retried_with_the_same_key_and_body() {
    let (r, url) = receiver(vec![
        Reply::Status(503, r#"{"error":"compute is restarting"}"#),
        Reply::Status(500, "boom"),
        Reply::Status(429, "slow down"),
        Reply::Status(200, r#"{"deleted":"i-9"}"#),
    ])
    .await;
    let d = driver(&url, Some("k3y"), 5_000);
    let (out, attempts) = call_until_settled(&d, "event-7").await;
    assert_eq!(out.unwrap(), json!({"deleted": "i-9"}));
    assert_eq!(attempts, 4);
    let seen = r.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    for s in &seen {
        assert_eq!(header(s, "idempotency-key"), Some("event-7"));
        assert_eq!(s.body, seen[0].body, "every attempt sends the same body");
        assert!(verify(b"k3y", &s.body, header(s, "x-berth-signature").unwrap()));
    }
}

#[tokio::test]
async fn client_errors_are_permanent_and_carry_the_receivers_reason() {
    for (code, body) in [(404, r#"{"error":"no such instance i-9"}"#), (400, "bad payload"), (409, "")] {
        let (r, url) = receiver(vec![Reply::Status(code, body)]).await;
        let (out, attempts) = call_until_settled(&driver(&url, None, 5_000), "event-8").await;
        let err = out.unwrap_err();
        assert!(err.permanent, "{code}: {err:?}");
        assert_eq!(attempts, 1, "{code}: not retried");
        assert_eq!(r.seen.lock().unwrap().len(), 1);
        assert!(err.message.contains(&code.to_string()), "{err:?}");
        if code == 404 {
            assert!(err.message.starts_with("no such instance i-9"), "{err:?}");
        }
    }
}

#[tokio::test]
async fn a_success_that_is_not_json_is_a_permanent_failure() {
    let (_r, url) = receiver(vec![Reply::Status(200, "OK")]).await;
    let err = driver(&url, None, 5_000).call("a", &json!({}), "k").await.unwrap_err();
    assert!(err.permanent, "{err:?}");
}

#[tokio::test]
async fn a_receiver_that_does_not_answer_in_time_is_retryable() {
    let (r, url) = receiver(vec![Reply::Stall, Reply::Status(200, r#"{"second":true}"#)]).await;
    let d = driver(&url, None, 300);
    let err = d.call("delete", &json!({}), "event-9").await.unwrap_err();
    assert!(!err.permanent, "{err:?}");
    assert!(err.message.contains("no answer within 300 ms"), "{err:?}");
    // The next attempt reaches the receiver with the same key.
    assert_eq!(d.call("delete", &json!({}), "event-9").await.unwrap(), json!({"second": true}));
    let seen = r.seen.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|s| header(s, "idempotency-key").unwrap()).collect::<Vec<_>>(), ["event-9"; 2]);
}

#[tokio::test]
async fn a_refused_connection_is_retryable() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    drop(listener);
    let err = driver(&url, None, 2_000).call("a", &json!({}), "k").await.unwrap_err();
    assert!(!err.permanent, "{err:?}");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let (r, url) = receiver(vec![Reply::Status(307, "")]).await;
    let err = driver(&url, None, 2_000).call("a", &json!({}), "k").await.unwrap_err();
    assert!(err.permanent, "{err:?}");
    assert_eq!(r.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn the_configuration_builds_a_webhook_driver() {
    let (r, url) = receiver(vec![]).await;
    let cfg: DriverConfig = serde_json::from_value(json!({"driver": "webhook", "url": url, "secret": "x"})).unwrap();
    let d = cfg.build().unwrap();
    assert_eq!(d.kind(), "webhook");
    assert_eq!(d.call("a", &json!({}), "k").await.unwrap(), json!({"ok": true}));
    assert_eq!(r.seen.lock().unwrap().len(), 1);
}
