//! `Idempotency-Key` on `POST /v1/leases` and `POST /v1/os-hosts`: a client
//! that retries a create (a timeout, a dropped connection) sends the same
//! key and gets what its first request made instead of a second one. The
//! key is the caller's own (project and user); the request is known again
//! by a hash of its route and body (`berth_app::idempotency`). Here: the
//! header read and the 201 marked as replayed.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_app::leases::RequestKey;
use berth_core::error::ErrorCode;
use serde_json::{Map, Value};

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
    Ok(Some(berth_app::idempotency::request_key(&ctx.project_id, &ctx.user_id, key, route, body)))
}
