//! `Idempotency-Key` on `POST /v1/leases`: a client that retries a create
//! (a timeout, a dropped connection) sends the same key and gets the leases
//! of its first request instead of new ones. The key is the caller's own
//! (project and user); the request is known again by a hash of its body.

use axum::http::HeaderMap;
use berth_core::error::ErrorCode;
use berth_store::commands::RequestKey;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::Context;
use crate::error::ApiError;

pub const HEADER: &str = "idempotency-key";
/// Says an answer is the one an earlier request with the key got.
pub const REPLAYED: &str = "idempotent-replayed";
/// Longest key taken (a UUID is 36).
const MAX_KEY: usize = 255;

/// The request's key, when it sends one: printable ASCII, at most 255
/// characters, once.
pub fn request_key(
    headers: &HeaderMap,
    ctx: &Context,
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
        fingerprint: fingerprint(body),
    }))
}

/// A hash of the body as JSON with its object keys sorted (serde_json's
/// map keeps them so): the same request however its keys were ordered.
fn fingerprint(body: &Map<String, Value>) -> String {
    let canonical = serde_json::to_vec(body).expect("a JSON value writes to memory");
    Sha256::digest(&canonical).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_body_in_another_key_order_has_the_same_fingerprint() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"name": "l", "end_date": "x", "n": [1, 2]}"#).unwrap();
        let b: Map<String, Value> = serde_json::from_str(r#"{"n": [1, 2], "end_date": "x", "name": "l"}"#).unwrap();
        let c: Map<String, Value> = serde_json::from_str(r#"{"n": [2, 1], "end_date": "x", "name": "l"}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }
}
