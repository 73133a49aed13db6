//! `Idempotency-Key` on `POST /v1/leases` and `POST /v1/os-hosts`: a client
//! that retries a create (a timeout, a dropped connection) sends the same
//! key and gets what its first request made instead of a second one. The
//! key is the caller's own (project and user); the request is known again
//! by a hash of its route and body.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_core::error::ErrorCode;
use berth_store::commands::RequestKey;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::Context;
use crate::error::ApiError;

pub const HEADER: &str = "idempotency-key";
/// Says an answer is the one an earlier request with the key got.
pub const REPLAYED: &str = "idempotent-replayed";
/// A create's 201 answer; marked [`REPLAYED`] when it is what an earlier
/// request with the key made.
pub fn created(body: Value, replayed: bool) -> Response {
    let mut resp = (StatusCode::CREATED, Json(body)).into_response();
    if replayed {
        resp.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    }
    resp
}

/// Longest key taken (a UUID is 36).
const MAX_KEY: usize = 255;

/// The key of a request to `route`, when it sends one: printable ASCII, at
/// most 255 characters, once.
pub fn request_key(
    headers: &HeaderMap,
    ctx: &Context,
    route: &str,
    body: &Map<String, Value>,
) -> Result<Option<RequestKey>, ApiError> {
    let mut sent = headers.get_all(HEADER).iter();
    let Some(value) = sent.next() else { return Ok(None) };
    let bad = |why: &str| ApiError::bad_request(ErrorCode::IdempotencyKeyInvalid, format!("Idempotency-Key {why}"));
    if sent.next().is_some() {
        return Err(bad("is sent more than once"));
    }
    let key = value.to_str().map_err(|_| bad("must be printable ASCII"))?;
    if key.is_empty() || key.len() > MAX_KEY || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(&format!("must be 1 to {MAX_KEY} printable ASCII characters without spaces")));
    }
    Ok(Some(RequestKey {
        caller: format!("{}:{}", ctx.project_id, ctx.user_id),
        key: key.to_string(),
        fingerprint: fingerprint(route, body),
    }))
}

/// A hash of the route and of the body as JSON with its object keys sorted
/// at every depth (serde_json's map keeps the request's order, so they are
/// sorted here): the same request however its keys were ordered, and one
/// key cannot stand for a lease and a host.
fn fingerprint(route: &str, body: &Map<String, Value>) -> String {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    hash.update([0]);
    hash.update(serde_json::to_vec(&Sorted(&Value::Object(body.clone()))).expect("a JSON value writes to memory"));
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A JSON value written with its objects' keys in sorted order.
struct Sorted<'a>(&'a Value);

impl serde::Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(o) => {
                let mut entries: Vec<(&String, &Value)> = o.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                s.collect_map(entries.into_iter().map(|(k, v)| (k, Sorted(v))))
            }
            Value::Array(a) => s.collect_seq(a.iter().map(Sorted)),
            v => v.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_body_in_another_key_order_has_the_same_fingerprint() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"name": "l", "end_date": "x", "n": [1, 2]}"#).unwrap();
        let b: Map<String, Value> = serde_json::from_str(r#"{"n": [1, 2], "end_date": "x", "name": "l"}"#).unwrap();
        let c: Map<String, Value> = serde_json::from_str(r#"{"n": [2, 1], "end_date": "x", "name": "l"}"#).unwrap();
        let d: Map<String, Value> = serde_json::from_str(r#"{"n": [{"b": 1, "a": 2}], "end_date": "x"}"#).unwrap();
        let e: Map<String, Value> = serde_json::from_str(r#"{"end_date": "x", "n": [{"a": 2, "b": 1}]}"#).unwrap();
        assert_eq!(fingerprint("leases", &d), fingerprint("leases", &e), "nested objects too");
        // The hash of the sorted text, as keys already recorded were made.
        let sorted = Sha256::new()
            .chain_update(b"leases\0")
            .chain_update(br#"{"end_date":"x","n":[{"a":2,"b":1}]}"#)
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        assert_eq!(fingerprint("leases", &d), sorted);
        assert_eq!(fingerprint("leases", &a), fingerprint("leases", &b));
        assert_ne!(fingerprint("leases", &a), fingerprint("leases", &c));
        assert_ne!(fingerprint("leases", &a), fingerprint("hosts", &a));
    }
}
