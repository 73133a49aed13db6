//! The manager, black box: real berthd processes on a real database, with a
//! real HTTP receiver standing in for the compute service.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

mod controls;
mod lifecycle;
mod log;
mod notifications;
mod replicas;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::receiver;
use berth_testkit::{Server, ADMIN, ALICE, BOB};
use chrono::{SecondsFormat, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A configuration file for berthd: short claims and polls so the tests are
/// quick; `plugins` is the `[plugins]` section.
fn config(dir: &tempfile::TempDir, plugins: &str) -> PathBuf {
    config_with_ttl(dir, plugins, 2000)
}

fn config_with_ttl(dir: &tempfile::TempDir, plugins: &str, claim_ttl_ms: u64) -> PathBuf {
    let path = dir.path().join("berth.toml");
    let text = format!(
        "[manager]\npoll_interval_ms = 250\nclaim_ttl_ms = {claim_ttl_ms}\nretry_min_ms = 50\nretry_max_ms = 200\n\
         max_attempts = 3\nshutdown_grace_ms = 1000\n\n{plugins}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `[plugins]` with the built-in types acting through webhooks on the
/// receiver (query strings `instance` and `host`) and `virtual:thing`, an
/// external type held entirely outside, served by the receiver too.
fn webhook_plugins(base: &str, instance: &str, host: &str, thing: &str) -> String {
    format!(
        r#"[plugins]
enabled = ["physical:host", "virtual:instance", "virtual:thing"]
[plugins.host]
recycle_grace_s = 2
[plugins.drivers."virtual:instance"]
driver = "webhook"
url = "{base}/hook?{instance}"
timeout_ms = 5000
[plugins.drivers."physical:host"]
driver = "webhook"
url = "{base}/hook?{host}"
timeout_ms = 5000
[plugins.external."virtual:thing"]
driver = "webhook"
url = "{base}/hook?validate=nothing&{thing}"
timeout_ms = 30000
"#
    )
}

fn rfc(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn in_secs(s: i64) -> String {
    rfc(Utc::now() + chrono::Duration::seconds(s))
}

async fn enrol(s: &Server, name: &str) -> String {
    let (st, host) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100})).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

async fn create(s: &Server, token: &str, body: Value) -> Value {
    let (st, l) = s.post("/v1/leases", token, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    l["lease"].clone()
}

async fn lease_events(s: &Server, id: &str, token: &str) -> Vec<Value> {
    let (st, body) = s.get(&format!("/v1/leases/{id}/events"), token).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["events"].as_array().unwrap().clone()
}

/// Waits for the lease's event of `kind` to reach `status`; returns it.
async fn wait_event(s: &Server, id: &str, kind: &str, status: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let events = lease_events(s, id, ADMIN).await;
        let e = events.iter().find(|e| e["event_type"] == kind).unwrap().clone();
        if e["status"] == status {
            return e;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {kind} {status}: {e}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn lease_status(s: &Server, id: &str) -> String {
    let (_, l) = s.get(&format!("/v1/leases/{id}"), ADMIN).await;
    l["lease"]["status"].as_str().unwrap().to_string()
}

/// Reads a Server-Sent Events stream until `stop`, returning each event's
/// (id, data).
async fn sse_collect(
    url: String,
    last_event_id: Option<String>,
    stop: tokio::sync::watch::Receiver<bool>,
    max: usize,
) -> Vec<(String, Value)> {
    let mut req = reqwest::Client::new().get(url).header("x-auth-token", ADMIN);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let mut resp = req.send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut buf = String::new();
    let mut out = Vec::new();
    let mut stop = stop;
    loop {
        tokio::select! {
            chunk = resp.chunk() => match chunk.unwrap() {
                Some(bytes) => buf.push_str(&String::from_utf8_lossy(&bytes)),
                None => return out,
            },
            _ = stop.wait_for(|s| *s) => return out,
        }
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if let Some(id) = id {
                out.push((id, serde_json::from_str(&data).unwrap()));
                if out.len() >= max {
                    return out;
                }
            }
        }
    }
}
