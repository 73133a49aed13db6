//! Errors as clients expect them. Placement's routes answer
//! `{"errors":[{status,title,detail,code,request_id}]}`; Blazar's answer
//! `{error_code, error_name, error_message, code, request_id}`; the rest
//! (the root, probes, metrics) answer Berth's
//! `{"error":{status,title,detail,code,request_id}}`. Every response
//! carries `x-openstack-request-id`.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_core::error::{Error, ErrorCode, ErrorKind};
use serde::Serialize;
use utoipa::ToSchema;

tokio::task_local! {
    /// The current request's id, for error bodies and log metadata.
    pub static REQUEST_ID: String;
    /// The error document the current request's route speaks, so that an
    /// error made anywhere (an extractor, the policy) answers in it.
    static ROUTE_STYLE: Style;
}

pub fn current_request_id() -> String {
    REQUEST_ID.try_with(|id| id.clone()).unwrap_or_default()
}

/// Gives every request an id (`req-<uuid>`) and echoes it in the
/// response: the caller's `X-Openstack-Request-Id` when it is one (so a
/// client's id finds its request in the log), a new one otherwise.
pub async fn request_id(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-openstack-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| well_formed_request_id(v))
        .map_or_else(|| format!("req-{}", uuid::Uuid::new_v4()), str::to_owned);
    req.extensions_mut().insert(crate::access_log::RequestId(id.clone()));
    let style = Style::of_path(req.uri().path());
    let mut resp = REQUEST_ID.scope(id.clone(), ROUTE_STYLE.scope(style, next.run(req))).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-openstack-request-id", v);
    }
    resp
}

/// `req-` and a UUID in its hyphenated form, as oslo.middleware makes them.
fn well_formed_request_id(id: &str) -> bool {
    id.strip_prefix("req-").is_some_and(|u| u.len() == 36 && uuid::Uuid::try_parse(u).is_ok())
}

/// Which error document a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Placement,
    Blazar,
    Berth,
}

impl Style {
    /// The document the routes under `path` speak.
    pub fn of_path(path: &str) -> Style {
        let under =
            |prefix: &str| path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if under("/placement") {
            Style::Placement
        } else if under("/v1") {
            Style::Blazar
        } else {
            Style::Berth
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub detail: String,
    pub style: Style,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, detail: impl Into<String>) -> Self {
        let style = ROUTE_STYLE.try_with(|s| *s).unwrap_or(Style::Blazar);
        ApiError { status, code, detail: detail.into(), style }
    }
    pub fn placement(mut self) -> Self {
        self.style = Style::Placement;
        self
    }
    pub fn in_style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }
    pub fn unauthenticated() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
            "The request you have made requires authentication.",
        )
    }
    pub fn forbidden() -> Self {
        ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, "Policy does not allow this request.")
    }
    pub fn bad_request(code: ErrorCode, detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, detail)
    }
}

/// The status a domain error kind answers with.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict | ErrorKind::Capacity | ErrorKind::InUse => StatusCode::CONFLICT,
        ErrorKind::Invalid => StatusCode::BAD_REQUEST,
        ErrorKind::Quota | ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Seconds a 503 asks the client to wait before trying again.
pub const RETRY_AFTER_S: u64 = 5;

/// What a client is told of a write whose outcome is unknown
/// (`berth.outcome_unknown`): how to retry it safely.
pub const OUTCOME_UNKNOWN: &str = "The write may or may not have been made: the database did not answer its commit \
     in time. Send the same request again after the Retry-After delay, with the same consumer generation or \
     Idempotency-Key: it is then made once, and the answer says so.";

/// What a client is told of `e`: a refusal in its API's words; a bug's or
/// an outage's detail (which may quote the database) goes to the log with
/// the request id, never to the client.
pub fn public_detail(e: &Error) -> String {
    let request_id = current_request_id();
    match e.kind {
        ErrorKind::Internal => {
            tracing::error!(request_id = %request_id, detail = %e.detail, "internal error");
            format!("An internal error occurred; the request id {request_id} finds it in the log.")
        }
        ErrorKind::Unavailable if e.code == ErrorCode::OutcomeUnknown => {
            tracing::warn!(request_id = %request_id, detail = %e.detail, "a write's outcome is unknown");
            OUTCOME_UNKNOWN.to_string()
        }
        ErrorKind::Unavailable => {
            tracing::warn!(request_id = %request_id, detail = %e.detail, "database unavailable");
            format!("The database is unavailable; try again in {RETRY_AFTER_S} seconds.")
        }
        _ => e.refusal.as_deref().map_or_else(|| e.detail.clone(), crate::wording::of),
    }
}

/// The codes Placement defines; any other code of ours is answered under
/// `/placement` as `placement.undefined_code`, as Placement would.
const PLACEMENT_CODES: &[ErrorCode] = &[
    ErrorCode::ConcurrentUpdate,
    ErrorCode::DuplicateName,
    ErrorCode::InventoryInUse,
    ErrorCode::ProviderInUse,
    ErrorCode::CannotDeleteParent,
    ErrorCode::ProviderNotFound,
    // Over quota keeps Berth's code, in Placement's error document (403).
    ErrorCode::QuotaExceeded,
    // So do Berth's refusals of a loan (docs/lending.md).
    ErrorCode::NoIdleCapacity,
    ErrorCode::LoanKind,
    ErrorCode::LendInvalid,
];

impl Style {
    /// The code this document answers `e` with: Placement names only its
    /// own codes (and Berth's outages and bugs, which its clients retry or
    /// report); Blazar's and Berth's documents carry every code as it is.
    pub fn code_of(self, e: &Error) -> ErrorCode {
        let ours = matches!(e.kind, ErrorKind::Internal | ErrorKind::Unavailable);
        match self {
            Style::Placement if !ours && !PLACEMENT_CODES.contains(&e.code) => ErrorCode::Undefined,
            _ => e.code,
        }
    }
}

/// The one conversion of a domain error, so handlers read as `?` chains:
/// its status by kind, its code as the route's document names it, and
/// what the client may be told of it.
impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let mut api = ApiError::new(status_of(e.kind), e.code, public_detail(&e));
        api.code = api.style.code_of(&e);
        api
    }
}

/// One error as Placement's and Berth's documents carry it.
#[derive(Serialize, ToSchema)]
pub struct ErrorFields {
    status: u16,
    title: Option<String>,
    detail: Option<String>,
    code: String,
    request_id: Option<String>,
}

/// Placement's error document (under `/placement`).
#[derive(Serialize, ToSchema)]
pub struct PlacementError {
    errors: Vec<ErrorFields>,
}

/// Blazar's error document, plus `code` and `request_id` (under `/v1`).
#[derive(Serialize, ToSchema)]
pub struct BlazarError {
    error_code: u16,
    error_name: Option<String>,
    error_message: Option<String>,
    code: String,
    request_id: Option<String>,
}

/// Berth's error document (everywhere else).
#[derive(Serialize, ToSchema)]
pub struct BerthError {
    error: ErrorFields,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = current_request_id();
        let title = self.status.canonical_reason().unwrap_or("Error").to_string();
        let (status, code) = (self.status.as_u16(), self.code.as_str().to_string());
        let fields = |detail: String| ErrorFields {
            status,
            title: Some(title.clone()),
            detail: Some(detail),
            code: code.clone(),
            request_id: Some(request_id.clone()),
        };
        let mut resp = match self.style {
            Style::Placement => {
                let body = PlacementError { errors: vec![fields(self.detail)] };
                (self.status, axum::Json(body)).into_response()
            }
            Style::Blazar => {
                let body = BlazarError {
                    error_code: status,
                    error_name: Some(title.clone()),
                    error_message: Some(self.detail),
                    code: code.clone(),
                    request_id: Some(request_id.clone()),
                };
                (self.status, axum::Json(body)).into_response()
            }
            Style::Berth => (self.status, axum::Json(BerthError { error: fields(self.detail) })).into_response(),
        };
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        resp
    }
}
