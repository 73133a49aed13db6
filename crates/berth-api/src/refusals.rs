//! Refusals made outside the handlers — no route, a wrong method, a body
//! over the limit, an extractor's rejection, the request timeout — answered
//! as the error document of the API the path belongs to, as handlers'
//! errors are.

use std::sync::Arc;
use std::time::Duration;

use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_core::error::ErrorCode;

use crate::config::ApiConfig;
use crate::error::{current_request_id, ApiError, Style, OUTCOME_UNKNOWN, RETRY_AFTER_S};

/// Most of a plain-text refusal's body kept as its detail.
const DETAIL_BYTES: usize = 4096;

/// Rewrites every error answer that is not already a document (axum's
/// plain-text rejections, empty 404s and 405s) into the path's document,
/// keeping its status and headers (`Allow`, `Retry-After`).
pub async fn as_documents(req: Request, next: Next) -> Response {
    let style = Style::of_path(req.uri().path());
    let limit = req.extensions().get::<Arc<ApiConfig>>().map(|c| c.max_body_bytes);
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) || is_document(resp.headers()) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = to_bytes(body, DETAIL_BYTES).await.map(|b| String::from_utf8_lossy(&b).trim().to_string());
    let said = text.unwrap_or_default();
    let (code, detail) = match status {
        StatusCode::NOT_FOUND => (ErrorCode::RouteNotFound, "The resource could not be found.".to_string()),
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = parts.headers.get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("");
            (ErrorCode::MethodNotAllowed, format!("The method is not allowed for this resource; allowed: {allowed}."))
        }
        StatusCode::PAYLOAD_TOO_LARGE => (ErrorCode::BodyTooLarge, too_large(limit)),
        StatusCode::SERVICE_UNAVAILABLE => {
            (ErrorCode::Unavailable, "The service is unavailable; try again shortly.".into())
        }
        s if s.is_server_error() => {
            tracing::error!(status = s.as_u16(), detail = %said, "an error answer without a document");
            (ErrorCode::Internal, "The server could not answer this request.".to_string())
        }
        _ if said.is_empty() => (ErrorCode::BadRequest, status.canonical_reason().unwrap_or("Bad request").to_string()),
        _ => (ErrorCode::BadRequest, said),
    };
    let mut out = ApiError::new(status, code, detail).in_style(style).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// Answers a request still unanswered after `limit` (`request_timeout_s`)
/// 503 with `Retry-After`: the server ran out of time, not the client. A
/// write stopped so may have sent its COMMIT already: its outcome is
/// unknown (`berth.outcome_unknown`); anything else is `berth.timeout`.
pub async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    let write = !req.method().is_safe();
    let path = req.uri().path().to_string();
    let Ok(resp) = tokio::time::timeout(limit, next.run(req)).await else {
        tracing::warn!(request_id = %current_request_id(), %path, "a request ran past the request timeout");
        let e = if write {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::OutcomeUnknown, OUTCOME_UNKNOWN)
        } else {
            let detail =
                format!("The request took longer than the server allows; try again in {RETRY_AFTER_S} seconds.");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Timeout, detail)
        };
        return e.into_response();
    };
    resp
}

/// A 413's detail, naming the limit when it is known.
pub fn too_large(limit: Option<usize>) -> String {
    match limit {
        Some(n) => format!("The request body is larger than the limit of {n} bytes."),
        None => "The request body is too large.".to_string(),
    }
}

/// JSON documents, and Placement's HTML errors for clients that ask for them.
fn is_document(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json") || t.starts_with("text/html"))
}

/// No route matched.
pub async fn no_route() -> Response {
    StatusCode::NOT_FOUND.into_response()
}
