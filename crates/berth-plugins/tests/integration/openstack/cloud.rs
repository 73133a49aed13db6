//! Keystone and Nova, as far as the driver uses them, served on a loopback
//! port. Nova's answers follow its API reference, error answers included.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// Tokens are `gAAAA-<n>`, the n-th issued; Nova takes only the latest.
fn token(n: usize) -> String {
    format!("gAAAA-{n}")
}

#[derive(Default)]
pub struct Aggregate {
    pub name: String,
    pub hosts: Vec<String>,
    pub metadata: BTreeMap<String, Value>,
}

#[derive(Default)]
pub struct Cloud {
    pub base: String,
    pub compute_hosts: Vec<String>,
    pub aggregates: BTreeMap<i64, Aggregate>,
    pub next_id: i64,
    /// Server id -> status.
    pub servers: BTreeMap<String, String>,
    /// The next this many Nova requests are answered 503.
    pub busy: usize,
    /// Every Nova request: method, path, status answered.
    pub log: Vec<(String, String, u16)>,
    pub tokens_issued: usize,
    /// Set to revoke the token issued last (as a Keystone restart, or a
    /// token expired early, would): the next one is issued fresh.
    pub revoke: bool,
}

pub type Shared = Arc<Mutex<Cloud>>;

fn fault(status: StatusCode, kind: &str, message: &str) -> Response {
    (status, Json(json!({ kind: {"code": status.as_u16(), "message": message} }))).into_response()
}

fn aggregate_doc(id: i64, a: &Aggregate) -> Value {
    json!({"id": id, "name": a.name, "hosts": a.hosts, "metadata": a.metadata, "availability_zone": null})
}

pub async fn keystone(State(cloud): State<Shared>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let user = &body["auth"]["identity"]["password"]["user"];
    if user["name"] != "berth" || user["password"] != "secret" || body["auth"]["scope"]["project"]["name"] != "service"
    {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": {"code": 401, "message": "bad credentials"}})))
            .into_response();
    }
    let mut c = cloud.lock().unwrap();
    c.tokens_issued += 1;
    c.revoke = false;
    let doc = json!({"token": {
        "issued_at": "2026-01-01T00:00:00.000000Z",
        "expires_at": "2026-01-01T01:00:00.000000Z",
        "catalog": [
            {"type": "identity", "endpoints": [{"interface": "public", "region_id": "RegionOne", "url": format!("{}/identity/v3", c.base)}]},
            {"type": "compute", "endpoints": [
                {"interface": "internal", "region_id": "RegionOne", "url": "http://127.0.0.1:1/wrong"},
                {"interface": "public", "region_id": "RegionOne", "url": format!("{}/compute/v2.1/", c.base)},
            ]},
        ],
    }});
    (StatusCode::CREATED, [("X-Subject-Token", token(c.tokens_issued))], Json(doc)).into_response()
}

pub async fn nova(State(cloud): State<Shared>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().strip_prefix("/compute/v2.1").unwrap_or("").to_string();
    let mut c = cloud.lock().unwrap();
    let answer = answer(&mut c, &method, &path, &headers, &body);
    c.log.push((method.to_string(), path, answer.status().as_u16()));
    answer
}

fn answer(c: &mut Cloud, method: &Method, path: &str, headers: &HeaderMap, body: &[u8]) -> Response {
    if c.revoke {
        c.tokens_issued += 1;
        c.revoke = false;
    }
    if headers.get("x-auth-token").and_then(|v| v.to_str().ok()) != Some(token(c.tokens_issued).as_str()) {
        return fault(StatusCode::UNAUTHORIZED, "unauthorized", "The request you have made requires authentication.");
    }
    let version = headers.get("openstack-api-version").and_then(|v| v.to_str().ok()).unwrap_or("");
    if !version.starts_with("compute 2.") {
        return fault(StatusCode::BAD_REQUEST, "badRequest", "no compute microversion");
    }
    if c.busy > 0 {
        c.busy -= 1;
        return fault(StatusCode::SERVICE_UNAVAILABLE, "serviceUnavailable", "nova-api is restarting");
    }
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.first() {
        Some(&"os-aggregates") => aggregates(c, method, &parts, &body),
        Some(&"servers") => servers(c, method, &parts, &body),
        _ => fault(StatusCode::NOT_FOUND, "itemNotFound", "The resource could not be found."),
    }
}

/// Nova's host aggregates API.
fn aggregates(c: &mut Cloud, method: &Method, parts: &[&str], body: &Value) -> Response {
    match (method.as_str(), parts) {
        ("GET", ["os-aggregates"]) => {
            let list: Vec<Value> = c.aggregates.iter().map(|(id, a)| aggregate_doc(*id, a)).collect();
            Json(json!({"aggregates": list})).into_response()
        }
        ("POST", ["os-aggregates"]) => {
            let Some(name) = body["aggregate"]["name"].as_str() else {
                return fault(StatusCode::BAD_REQUEST, "badRequest", "Invalid input for field/attribute aggregate.");
            };
            if c.aggregates.values().any(|a| a.name == name) {
                return fault(StatusCode::CONFLICT, "conflictingRequest", &format!("Aggregate {name} already exists."));
            }
            c.next_id += 1;
            let id = c.next_id;
            c.aggregates.insert(id, Aggregate { name: name.into(), ..Default::default() });
            Json(json!({"aggregate": aggregate_doc(id, &c.aggregates[&id])})).into_response()
        }
        ("DELETE", ["os-aggregates", id]) => {
            let id: i64 = id.parse().unwrap_or(-1);
            match c.aggregates.get(&id) {
                None => fault(StatusCode::NOT_FOUND, "itemNotFound", &format!("Aggregate {id} could not be found.")),
                Some(a) if !a.hosts.is_empty() => fault(
                    StatusCode::BAD_REQUEST,
                    "badRequest",
                    &format!("Cannot remove aggregate {id}. Reason: Host aggregate is not empty."),
                ),
                Some(_) => {
                    c.aggregates.remove(&id);
                    StatusCode::OK.into_response()
                }
            }
        }
        ("POST", ["os-aggregates", id, "action"]) => aggregate_action(c, id.parse().unwrap_or(-1), body),
        _ => fault(StatusCode::NOT_FOUND, "itemNotFound", "The resource could not be found."),
    }
}

/// `POST /os-aggregates/{id}/action`: add_host, remove_host, set_metadata.
fn aggregate_action(c: &mut Cloud, id: i64, body: &Value) -> Response {
    let known_host = |h: &str| c.compute_hosts.iter().any(|k| k == h);
    let host = body["add_host"]["host"].as_str().or(body["remove_host"]["host"].as_str()).map(String::from);
    if let Some(h) = &host {
        if !known_host(h) {
            return fault(StatusCode::NOT_FOUND, "itemNotFound", &format!("Compute host {h} could not be found."));
        }
    }
    let Some(a) = c.aggregates.get_mut(&id) else {
        return fault(StatusCode::NOT_FOUND, "itemNotFound", &format!("Aggregate {id} could not be found."));
    };
    if body.get("add_host").is_some() {
        let h = host.unwrap();
        if a.hosts.contains(&h) {
            return fault(
                StatusCode::CONFLICT,
                "conflictingRequest",
                &format!("Cannot add host {h} in aggregate {id}: host exists"),
            );
        }
        a.hosts.push(h);
    } else if body.get("remove_host").is_some() {
        let h = host.unwrap();
        if !a.hosts.contains(&h) {
            return fault(
                StatusCode::NOT_FOUND,
                "itemNotFound",
                &format!("Cannot remove host {h} in aggregate {id}: not found"),
            );
        }
        a.hosts.retain(|x| *x != h);
    } else if let Some(m) = body["set_metadata"]["metadata"].as_object() {
        for (k, v) in m {
            if v.is_null() {
                a.metadata.remove(k);
            } else {
                a.metadata.insert(k.clone(), v.clone());
            }
        }
    } else {
        return fault(StatusCode::BAD_REQUEST, "badRequest", "Invalid input for field/attribute action.");
    }
    Json(json!({"aggregate": aggregate_doc(id, a)})).into_response()
}

/// Nova's servers API: show, delete and the actions the driver uses.
fn servers(c: &mut Cloud, method: &Method, parts: &[&str], body: &Value) -> Response {
    match (method.as_str(), parts) {
        ("GET", ["servers", id]) => match c.servers.get(*id) {
            Some(s) => Json(json!({"server": {"id": id, "status": s}})).into_response(),
            None => fault(StatusCode::NOT_FOUND, "itemNotFound", "Instance could not be found."),
        },
        ("DELETE", ["servers", id]) => match c.servers.remove(*id) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => fault(StatusCode::NOT_FOUND, "itemNotFound", "Instance could not be found."),
        },
        ("POST", ["servers", id, "action"]) => {
            let Some(status) = c.servers.get_mut(*id) else {
                return fault(StatusCode::NOT_FOUND, "itemNotFound", "Instance could not be found.");
            };
            let action = body.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
            let (from, to): (&[&str], &str) = match action.as_str() {
                "unshelve" => (&["SHELVED", "SHELVED_OFFLOADED"], "ACTIVE"),
                "os-start" => (&["SHUTOFF"], "ACTIVE"),
                "shelve" => (&["ACTIVE", "SHUTOFF", "PAUSED", "SUSPENDED"], "SHELVED_OFFLOADED"),
                _ => return fault(StatusCode::BAD_REQUEST, "badRequest", "Unsupported action."),
            };
            if !from.contains(&status.as_str()) {
                return fault(
                    StatusCode::CONFLICT,
                    "conflictingRequest",
                    &format!("Cannot '{action}' instance {id} while it is in vm_state {}", status.to_lowercase()),
                );
            }
            *status = to.into();
            StatusCode::ACCEPTED.into_response()
        }
        _ => fault(StatusCode::NOT_FOUND, "itemNotFound", "The resource could not be found."),
    }
}
