//! A real HTTP receiver standing in for the compute service (or any far side
//! of a webhook driver): it applies each effect once per idempotency key and
//! answers a repeated key with its first answer, as docs/plugins.md asks.
//!
//! Behaviour per URL query, so one receiver serves several plugins:
//! - `fail=N`: the first N calls of each key answer 503;
//! - `fail=always`: every call answers 503 `{"error": "compute is down"}`;
//! - `fail=permanent`: every call answers 400 `{"error": "no such instance"}`;
//! - `fail=until_fixed`: every call answers 503 `{"error": "compute is
//!   broken"}` until the test calls [`Receiver::fix`];
//! - `hold=1`: the first call of each key is held until released;
//! - `validate=nothing`: `validate` calls answer `{"kind": "nothing"}` (an
//!   external resource type held entirely outside);
//! - `delay_ms=N`: every hook call takes N ms to answer.
//!
//! Lease notifications (a body with `event_type` and `message_id` instead
//! of `action` and `idempotency_key`) are received the same way: the event
//! type stands for the action and the message id for the key. While
//! [`Receiver::set_down`] holds, every call answers 503.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

/// One call as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Call {
    pub action: String,
    pub key: String,
    pub payload: Value,
    pub at: Instant,
    /// When it arrived, on this machine's wall clock (the database's too:
    /// the tests run beside their database server).
    pub received: chrono::DateTime<chrono::Utc>,
    /// The Idempotency-Key header (must equal `key`).
    pub header_key: Option<String>,
    /// The whole body as sent, and its X-Berth-Signature header.
    pub body: Vec<u8>,
    pub signature: Option<String>,
}

#[derive(Default)]
pub struct Receiver {
    pub calls: Mutex<Vec<Call>>,
    /// Effects applied: key -> (action, answer). At most one per key.
    pub applied: Mutex<HashMap<String, (String, Value)>>,
    tries: Mutex<HashMap<String, u32>>,
    held: tokio::sync::Notify,
    release: Mutex<bool>,
    fixed: std::sync::atomic::AtomicBool,
    /// Calls answered 2xx, in the order they were answered.
    accepted: Mutex<Vec<Call>>,
    down: std::sync::atomic::AtomicBool,
}

impl Receiver {
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    pub fn calls_of(&self, action: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.action == action).collect()
    }
    pub fn applied(&self) -> HashMap<String, (String, Value)> {
        self.applied.lock().unwrap().clone()
    }
    /// The calls answered with success, in order.
    pub fn accepted(&self) -> Vec<Call> {
        self.accepted.lock().unwrap().clone()
    }
    /// While `down`, every call answers 503, as a far side that is down.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
    }
    /// Lets held calls (and every later one) through.
    pub fn release(&self) {
        *self.release.lock().unwrap() = true;
        self.held.notify_waiters();
    }
    /// Calls with `fail=until_fixed` succeed from now on.
    pub fn fix(&self) {
        self.fixed.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    /// Waits until `pred` holds over the calls seen, up to `secs`.
    pub async fn wait_for(&self, secs: u64, what: &str, pred: impl Fn(&[Call]) -> bool) {
        let deadline = Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            if pred(&self.calls()) {
                return;
            }
            assert!(Instant::now() < deadline, "receiver: timed out waiting for {what}; saw {:?}", self.calls());
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

async fn receive(
    State(r): State<Arc<Receiver>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let envelope: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let field = |a: &str, b: &str| envelope[a].as_str().or(envelope[b].as_str()).unwrap_or_default().to_string();
    let action = field("action", "event_type");
    let key = field("idempotency_key", "message_id");
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let call = Call {
        action: action.clone(),
        key: key.clone(),
        payload: envelope["payload"].clone(),
        at: Instant::now(),
        received: wall_clock(),
        header_key: header("idempotency-key"),
        body: body.to_vec(),
        signature: header("x-berth-signature"),
    };
    r.calls.lock().unwrap().push(call.clone());
    if r.down.load(std::sync::atomic::Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, json!({"error": "down"}).to_string());
    }
    if action == "validate" {
        return match q.get("validate").map(String::as_str) {
            Some("nothing") => (StatusCode::OK, json!({"kind": "nothing"}).to_string()),
            _ => (StatusCode::BAD_REQUEST, json!({"error": "validate is not served here"}).to_string()),
        };
    }
    let tries = {
        let mut t = r.tries.lock().unwrap();
        let n = t.entry(key.clone()).or_default();
        *n += 1;
        *n
    };
    if let Some(ms) = q.get("delay_ms").and_then(|d| d.parse::<u64>().ok()) {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    if q.contains_key("hold") && tries == 1 {
        loop {
            let notified = r.held.notified();
            if *r.release.lock().unwrap() {
                break;
            }
            notified.await;
        }
    }
    match q.get("fail").map(String::as_str) {
        Some("always") => {
            return (StatusCode::SERVICE_UNAVAILABLE, json!({"error": "compute is down"}).to_string());
        }
        Some("until_fixed") if !r.fixed.load(std::sync::atomic::Ordering::SeqCst) => {
            return (StatusCode::SERVICE_UNAVAILABLE, json!({"error": "compute is broken"}).to_string());
        }
        Some("permanent") => return (StatusCode::BAD_REQUEST, json!({"error": "no such instance"}).to_string()),
        Some(n) if tries <= n.parse::<u32>().unwrap_or(0) => {
            return (StatusCode::SERVICE_UNAVAILABLE, json!({"error": format!("busy (try {tries})")}).to_string());
        }
        _ => {}
    }
    r.accepted.lock().unwrap().push(call);
    let mut applied = r.applied.lock().unwrap();
    let answer = applied
        .entry(key.clone())
        .or_insert_with(|| (action.clone(), json!({"applied": action, "key": key})))
        .1
        .clone();
    (StatusCode::OK, answer.to_string())
}

/// The far side's own clock: what an outside service would stamp.
#[allow(clippy::disallowed_methods)] // the far side is not Berth: it keeps its own time
fn wall_clock() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

/// Starts a receiver on the loopback; returns it and its base URL (append
/// `/hook?...`).
pub async fn start() -> (Arc<Receiver>, String) {
    let r = Arc::new(Receiver::default());
    let app = Router::new().route("/hook", post(receive)).with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (r, url)
}
