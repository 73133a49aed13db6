//! What every Placement handler shares: the request's microversion and
//! caller, the checks Placement makes in a fixed order (version gate 404,
//! content type 415, accept 406, policy 403, body 400), its error document,
//! query strings, bodies and the cache headers of 1.15.

use std::collections::BTreeMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_app::placement::{May, Rule};
use berth_app::{App, Owner};
use berth_core::error::{ErrorCode, ErrorKind};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::microversion::Version;
use super::schema;
use crate::access::Rules;
use crate::auth::Context;
use crate::error::{public_detail, status_of, ApiError, Style};
use crate::AppState;

/// Where Placement is mounted.
pub const PREFIX: &str = "/placement";

/// A Placement error with a status and a message.
pub fn err(status: StatusCode, detail: impl Into<String>) -> ApiError {
    ApiError::new(status, ErrorCode::Undefined, detail).placement()
}

pub fn bad_request(detail: impl Into<String>) -> ApiError {
    err(StatusCode::BAD_REQUEST, detail)
}

pub fn not_found(detail: impl Into<String>) -> ApiError {
    err(StatusCode::NOT_FOUND, detail)
}

pub fn conflict(code: ErrorCode, detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, detail).placement()
}

/// A domain error as Placement answers it, the message prefixed by
/// `context` (Placement's wording of where the refusal arose). Without a
/// prefix, `?` does the same through `From<Error> for ApiError`.
pub fn domain(e: berth_core::Error, context: &str) -> ApiError {
    let ours = matches!(e.kind, ErrorKind::Internal | ErrorKind::Unavailable);
    let code = Style::Placement.code_of(&e);
    let detail = if ours { public_detail(&e) } else { format!("{context}{}", public_detail(&e)) };
    ApiError::new(status_of(e.kind), code, detail).placement()
}

/// The request as Placement sees it.
pub struct Pl {
    pub mv: Version,
    ctx: Option<Context>,
    rules: std::sync::Arc<Rules>,
    /// The request's headers that handlers look at (the first of each, as
    /// `HeaderMap::get` gives it), not a copy of the whole map.
    content_type: Option<HeaderValue>,
    accept: Option<HeaderValue>,
    host: Option<HeaderValue>,
    /// The body, when the input check parsed it as JSON.
    parsed: Option<std::sync::Arc<Value>>,
}

impl FromRequestParts<AppState> for Pl {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(Pl {
            mv: parts.extensions.get::<Version>().copied().unwrap_or(super::microversion::MIN),
            ctx: parts.extensions.get::<Context>().cloned(),
            rules: state.rules.clone(),
            content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
            accept: parts.headers.get(header::ACCEPT).cloned(),
            host: parts.headers.get(header::HOST).cloned(),
            parsed: parts.extensions.get::<crate::input::ParsedBody>().map(|b| b.0.clone()),
        })
    }
}

/// Whether an `Accept` header admits `application/json`.
pub fn accepts_json(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = accept.and_then(|a| a.to_str().ok()) else { return true };
    if accept.trim().is_empty() {
        return true;
    }
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .next()
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        q > 0.0 && matches!(media.as_str(), "application/json" | "application/*" | "*/*")
    })
}

impl Pl {
    /// 404 unless the microversion has the feature (Placement hides routes).
    pub fn since(&self, has: bool) -> Result<(), ApiError> {
        if has {
            Ok(())
        } else {
            Err(not_found("The resource could not be found."))
        }
    }

    /// 415 unless the body is declared JSON.
    pub fn json_content(&self) -> Result<(), ApiError> {
        let ct = self.content_type.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("");
        let essence = ct.split(';').next().unwrap_or("").trim();
        if essence.eq_ignore_ascii_case("application/json") {
            return Ok(());
        }
        let shown = if essence.is_empty() { "None" } else { essence };
        Err(err(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("The media type {shown} is not supported, use application/json"),
        ))
    }

    /// 406 unless the client accepts JSON.
    pub fn accept_json(&self) -> Result<(), ApiError> {
        if accepts_json(self.accept.as_ref()) {
            Ok(())
        } else {
            Err(err(StatusCode::NOT_ACCEPTABLE, "Only application/json is provided"))
        }
    }

    /// The caller, whoever it is (the middleware has refused anonymous calls).
    pub fn caller(&self) -> Result<&Context, ApiError> {
        self.ctx.as_ref().ok_or_else(|| ApiError::unauthenticated().placement())
    }

    /// The operations, and the caller's leave to follow `rule` (asked
    /// before the path or the body is read, as Placement does); else 403.
    pub fn may(&self, state: &AppState, rule: Rule) -> Result<(App, May), ApiError> {
        self.may_on(state, rule, Owner::Caller)
    }

    /// [`Pl::may`], for `owner`'s things.
    pub fn may_on(&self, state: &AppState, rule: Rule, owner: Owner<'_>) -> Result<(App, May), ApiError> {
        let caller = crate::gate::caller_under(&self.rules, self.caller()?);
        let app = crate::gate::app(state);
        let may = app.placement().may_on(&caller, rule, owner).map_err(|_| forbidden())?;
        Ok((app, may))
    }

    /// [`body`], from the value the input check parsed when it did (it is
    /// of these same bytes).
    pub fn body<T: DeserializeOwned>(&self, bytes: &[u8], schema: &Value) -> Result<T, ApiError> {
        let Some(value) = &self.parsed else { return body(bytes, schema) };
        schema::validate(value, schema).map_err(|e| bad_request(format!("JSON does not validate: {e}")))?;
        T::deserialize(value.as_ref()).map_err(|e| bad_request(format!("JSON does not validate: {e}")))
    }

    /// An absolute URL for `path` (below the mount point), for `Location`.
    pub fn location(&self, path: &str) -> String {
        let host = self.host.as_ref().and_then(|h| h.to_str().ok()).unwrap_or("localhost");
        format!("http://{host}{PREFIX}{path}")
    }

    /// A JSON response; with 1.15, `cache-control` and `last-modified`.
    pub fn json(&self, status: StatusCode, body: &Value, modified: Option<DateTime<Utc>>) -> Response {
        let mut resp = (status, axum::Json(body)).into_response();
        self.cache_headers(&mut resp, modified);
        resp
    }

    /// A JSON response whose body is written as it goes (it must be JSON);
    /// with 1.15, `cache-control` and `last-modified`.
    pub fn json_stream(&self, status: StatusCode, body: axum::body::Body, modified: Option<DateTime<Utc>>) -> Response {
        let mut resp = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        self.cache_headers(&mut resp, modified);
        resp
    }

    /// A body-less response (no content type).
    pub fn empty(&self, status: StatusCode, modified: Option<DateTime<Utc>>) -> Response {
        let mut resp = status.into_response();
        resp.headers_mut().remove(header::CONTENT_TYPE);
        self.cache_headers(&mut resp, modified);
        resp
    }

    fn cache_headers(&self, resp: &mut Response, modified: Option<DateTime<Utc>>) {
        if let (true, Some(at)) = (self.mv.cache_headers(), modified) {
            let h = resp.headers_mut();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            if let Ok(v) = HeaderValue::from_str(&at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()) {
                h.insert(header::LAST_MODIFIED, v);
            }
        }
    }
}

pub fn forbidden() -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Undefined, "Policy does not allow this request to be performed.")
        .placement()
}

/// Adds a `Location` header.
pub fn with_location(mut resp: Response, url: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(url) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

/// Parses a JSON body and validates it against `schema`.
pub fn body_value(bytes: &[u8], schema: &Value) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| bad_request(format!("Malformed JSON: {e}")))?;
    schema::validate(&value, schema).map_err(|e| bad_request(format!("JSON does not validate: {e}")))?;
    Ok(value)
}

/// [`body_value`], then into a type (which the schema has already shaped).
pub fn body<T: DeserializeOwned>(bytes: &[u8], schema: &Value) -> Result<T, ApiError> {
    let value = body_value(bytes, schema)?;
    serde_json::from_value(value).map_err(|e| bad_request(format!("JSON does not validate: {e}")))
}

/// A query string: its pairs in order (a key may repeat).
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Query {
        let pairs = raw
            .map(|q| form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
            .unwrap_or_default();
        Query { pairs }
    }

    /// The last value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }

    pub fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    /// Validates the parameters (last value of each) as a JSON object.
    pub fn validate(&self, schema: &Value) -> Result<(), ApiError> {
        let object: BTreeMap<&str, &str> = self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let value = serde_json::to_value(object).unwrap_or(Value::Null);
        schema::validate(&value, schema).map_err(|e| bad_request(format!("Invalid query string parameters: {e}")))
    }
}

/// A path segment that must be a UUID; anything else is "not found" as
/// `what` says.
pub fn path_uuid(raw: &str, what: impl FnOnce() -> ApiError) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::try_parse(raw).map_err(|_| what())
}

/// `last-modified` for content that has no time of its own: when it is
/// served. Only a header, decided on by nobody, so the local clock will do.
#[allow(clippy::disallowed_methods)] // an HTTP header, like `Date`; nothing is decided on it
pub fn served_now() -> Option<DateTime<Utc>> {
    Some(Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_ranges() {
        let h = |s: &'static str| Some(HeaderValue::from_static(s));
        assert!(accepts_json(None));
        assert!(accepts_json(h("application/json").as_ref()));
        assert!(accepts_json(h("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8").as_ref()));
        assert!(!accepts_json(h("text/html,application/xhtml+xml,application/xml;q=0.9").as_ref()));
        assert!(!accepts_json(h("text/plain").as_ref()));
        assert!(!accepts_json(h("application/json;q=0").as_ref()));
    }

    #[test]
    fn repeated_query_keys() {
        let q = Query::parse(Some("member_of=a&member_of=in:b,c&name=%E2%98%83"));
        assert_eq!(q.all("member_of"), vec!["a", "in:b,c"]);
        assert_eq!(q.get("name"), Some("☃"));
    }
}
