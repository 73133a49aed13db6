//! What every request must be before a handler reads it: a path and query
//! that decode to UTF-8 without control characters, ids and names of at most
//! [`MAX_NAME`] characters, and a body within the size and nesting limits
//! whose strings carry no control characters. Refusals are 4xx documents in
//! the path's API format, decided before anything is read or written.

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_core::error::ErrorCode;
use percent_encoding::percent_decode;
use serde_json::Value;

use crate::config::ApiConfig;
use crate::error::{ApiError, Style};
use crate::refusals::too_large;

/// Longest id or name, in characters (Keystone's and Placement's bound).
pub const MAX_NAME: usize = 255;

/// Largest refused body read to its end before the 413 is sent.
const DRAIN_BYTES: usize = 16 * 1024 * 1024;

/// The body as parsed here, for handlers that would parse it again (a
/// claim's second parse was some 3 % of its CPU).
#[derive(Debug, Clone)]
pub struct ParsedBody(pub Arc<Value>);

/// Checks the request (see the module) and passes it on with its body read.
pub async fn check(req: Request, next: Next) -> Response {
    let style = Style::of_path(req.uri().path());
    let cfg = req.extensions().get::<Arc<ApiConfig>>().cloned().unwrap_or_default();
    // Placement's schemas bound its names and ids themselves, with the
    // messages its clients expect.
    let max_name = (style != Style::Placement).then_some(MAX_NAME);
    if let Err(e) = check_uri(req.uri(), max_name) {
        return e.in_style(style).into_response();
    }
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let (mut parts, body) = req.into_parts();
    if declared.is_some_and(|n| n > cfg.max_body_bytes as u64) {
        // Read what a client sends before it reads the answer, up to a
        // bound, so that it sees the 413 rather than a reset connection.
        if declared.is_some_and(|n| n <= DRAIN_BYTES as u64) {
            let _ = to_bytes(body, DRAIN_BYTES).await;
        }
        return body_too_large(&cfg, style);
    }
    let bytes = match to_bytes(body, cfg.max_body_bytes).await {
        Ok(b) => b,
        Err(e) if is_length_limit(&e) => return body_too_large(&cfg, style),
        Err(e) => {
            return ApiError::bad_request(ErrorCode::BadRequest, format!("the body could not be read: {e}"))
                .in_style(style)
                .into_response()
        }
    };
    // A body that is not JSON is left to its handler, which says why.
    if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
        if let Err(e) = check_json(&v, cfg.max_json_depth, max_name) {
            return e.in_style(style).into_response();
        }
        parts.extensions.insert(ParsedBody(Arc::new(v)));
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

fn body_too_large(cfg: &ApiConfig, style: Style) -> Response {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::BodyTooLarge, too_large(Some(cfg.max_body_bytes)))
        .in_style(style)
        .into_response()
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

fn bad(code: ErrorCode, detail: String) -> ApiError {
    ApiError::bad_request(code, detail)
}

/// Path segments and query parameters, percent-decoded.
fn check_uri(uri: &Uri, max_name: Option<usize>) -> Result<(), ApiError> {
    for segment in uri.path().split('/').filter(|s| !s.is_empty()) {
        let text = decode(segment, false)
            .ok_or_else(|| bad(ErrorCode::BadEncoding, "the path is not percent-encoded UTF-8".to_string()))?;
        check_text("a path segment", &text, Kind::Name(max_name))?;
    }
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(raw_key, true)
            .ok_or_else(|| bad(ErrorCode::BadEncoding, "the query is not percent-encoded UTF-8".to_string()))?;
        check_text("a query parameter name", &key, Kind::Name(max_name))?;
        let value = decode(raw_value, true).ok_or_else(|| {
            bad(ErrorCode::BadEncoding, format!("query parameter {key:?} is not percent-encoded UTF-8"))
        })?;
        check_text(&format!("query parameter {key}"), &value, Kind::of_field(&key, max_name))?;
    }
    Ok(())
}

/// Percent-decoding (`+` as a space in a query), or None if not UTF-8.
fn decode(raw: &str, query: bool) -> Option<String> {
    let raw = if query { raw.replace('+', " ") } else { raw.to_string() };
    percent_decode(raw.as_bytes()).decode_utf8().ok().map(|s| s.into_owned())
}

/// What a string is, for [`check_text`].
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Free text: line breaks and tabs allowed.
    Text,
    /// An id or a name: no control character at all, and at most this many
    /// characters when bounded.
    Name(Option<usize>),
}

impl Kind {
    /// Ids and names are the fields `id`, `name`, `marker`, `…_id`, `…_name`.
    fn of_field(key: &str, max_name: Option<usize>) -> Kind {
        if matches!(key, "id" | "name" | "marker") || key.ends_with("_id") || key.ends_with("_name") {
            Kind::Name(max_name)
        } else {
            Kind::Text
        }
    }
}

/// No control characters in `text`, and a name within its bound.
fn check_text(field: &str, text: &str, kind: Kind) -> Result<(), ApiError> {
    let refused = |c: char| c.is_control() && (matches!(kind, Kind::Name(_)) || !matches!(c, '\t' | '\n' | '\r'));
    if let Some(c) = text.chars().find(|c| refused(*c)) {
        return Err(bad(
            ErrorCode::ControlCharacter,
            format!("{field} contains the control character U+{:04X}", c as u32),
        ));
    }
    if let Kind::Name(Some(max)) = kind {
        if text.chars().count() > max {
            return Err(bad(ErrorCode::TooLong, format!("{field} is longer than {max} characters")));
        }
    }
    Ok(())
}

/// Nesting depth, and every key and string in the document.
fn check_json(v: &Value, max_depth: usize, max_name: Option<usize>) -> Result<(), ApiError> {
    fn walk(v: &Value, at: &str, key: &str, depth: usize, max: usize, names: Option<usize>) -> Result<(), ApiError> {
        let field = || if at.is_empty() { "the body".to_string() } else { format!("field {at}") };
        match v {
            Value::Array(_) | Value::Object(_) if depth >= max => {
                Err(bad(ErrorCode::TooDeep, format!("{} nests deeper than {max} levels", field())))
            }
            Value::Array(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, x)| walk(x, &format!("{at}/{i}"), key, depth + 1, max, names)),
            Value::Object(map) => map.iter().try_for_each(|(k, x)| {
                let here = format!("{at}/{k}");
                check_text(&format!("a key in {}", field()), k, Kind::Text)?;
                walk(x, &here, k, depth + 1, max, names)
            }),
            Value::String(s) => check_text(&field(), s, Kind::of_field(key, names)),
            _ => Ok(()),
        }
    }
    walk(v, "", "", 0, max_depth, max_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_uri_(uri: &Uri) -> Result<(), ApiError> {
        check_uri(uri, Some(MAX_NAME))
    }

    fn check_json_(v: &Value, depth: usize) -> Result<(), ApiError> {
        check_json(v, depth, Some(MAX_NAME))
    }

    fn code(r: Result<(), ApiError>) -> ErrorCode {
        r.unwrap_err().code
    }

    #[test]
    fn uris_decode_to_clean_text() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert!(check_uri_(&uri("/v1/leases?name=a%20b&x=1+2")).is_ok());
        assert_eq!(code(check_uri_(&uri("/v1/leases/%FF"))), ErrorCode::BadEncoding);
        assert_eq!(code(check_uri_(&uri("/v1/leases?project_id=%C3"))), ErrorCode::BadEncoding);
        assert_eq!(code(check_uri_(&uri("/v1/leases/a%00b"))), ErrorCode::ControlCharacter);
        assert_eq!(code(check_uri_(&uri("/v1/leases?project_id=p%0A"))), ErrorCode::ControlCharacter);
        let long = "x".repeat(MAX_NAME + 1);
        assert_eq!(code(check_uri_(&uri(&format!("/v1/os-hosts/{long}")))), ErrorCode::TooLong);
        assert_eq!(code(check_uri_(&uri(&format!("/v1/leases?project_id={long}")))), ErrorCode::TooLong);
        assert!(check_uri_(&uri(&format!("/placement/allocation_candidates?member_of={long}"))).is_ok());
        assert!(check_uri(&uri(&format!("/placement/traits/{long}")), None).is_ok(), "Placement bounds its own");
        assert!(check_json(&json!({"name": long}), 32, None).is_ok());
    }

    #[test]
    fn bodies_are_bounded_and_clean() {
        assert!(check_json_(&json!({"name": "a", "note": "two\nlines", "n": [1, {"x": null}]}), 32).is_ok());
        assert_eq!(code(check_json_(&json!({"name": "a\u{0}"}), 32)), ErrorCode::ControlCharacter);
        assert_eq!(code(check_json_(&json!({"name": "a\nb"}), 32)), ErrorCode::ControlCharacter);
        assert_eq!(code(check_json_(&json!({"a\u{1}": 1}), 32)), ErrorCode::ControlCharacter);
        assert_eq!(code(check_json_(&json!({"r": [{"x": "\u{7f}"}]}), 32)), ErrorCode::ControlCharacter);
        assert_eq!(code(check_json_(&json!({"host_id": "h".repeat(256)}), 32)), ErrorCode::TooLong);
        assert!(check_json_(&json!({"resource_properties": "h".repeat(256)}), 32).is_ok());
        assert_eq!(code(check_json_(&json!([[[1]]]), 2)), ErrorCode::TooDeep);
        assert!(check_json_(&json!([[1]]), 2).is_ok());
        let e = check_json_(&json!({"reservations": [{"name": "\u{0}"}]}), 32).unwrap_err();
        assert!(e.detail.contains("/reservations/0/name"), "{}", e.detail);
    }
}
