//! Who is calling: a request is authenticated into a [`Context`] (user,
//! project, domain, roles, and the service that sent it on the user's
//! behalf, if any), by one of three modes:
//! - `noauth` ([`noauth`]): OpenStack's noauth2 headers, for local use;
//! - `keystone` ([`keystone`]): tokens validated against Keystone as
//!   keystonemiddleware does, cached;
//! - `jwt` ([`jwt`]): OpenID Connect bearer tokens checked against a JWKS.
//!
//! What a context may do is the policy's question ([`crate::access`]): the
//! context keeps its roles to itself, so no handler can check them by hand.
//! Which requests a restricted token may make at all is its access rules'
//! ([`access_rules`]), checked here, once, for every mode.

pub mod access_rules;
pub mod jwt;
pub mod keystone;
pub mod login;
pub mod noauth;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use berth_core::error::ErrorCode;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use access_rules::AccessRules;

/// The longest token looked at (bytes): Fernet tokens are a few hundred,
/// JWTs a few kilobytes. A longer one is refused before any call out, so
/// no caller can make Keystone (or the JWKS fetch) carry its headers.
pub const MAX_TOKEN: usize = 8 * 1024;

/// The headers that carry tokens.
const TOKEN_HEADERS: [header::HeaderName; 3] = [
    header::HeaderName::from_static("x-auth-token"),
    header::HeaderName::from_static("x-service-token"),
    header::AUTHORIZATION,
];

/// The authentication mode, as the configuration names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    Noauth,
    Keystone,
    Jwt,
}

impl std::str::FromStr for AuthMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "noauth" => Ok(AuthMode::Noauth),
            "keystone" => Ok(AuthMode::Keystone),
            "jwt" => Ok(AuthMode::Jwt),
            other => Err(format!("unknown auth mode {other:?}: use noauth, keystone or jwt")),
        }
    }
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Noauth => "noauth",
            AuthMode::Keystone => "keystone",
            AuthMode::Jwt => "jwt",
        }
    }
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub user_id: String,
    pub project_id: String,
    roles: Vec<String>,
    user_domain_id: Option<String>,
    project_domain_id: Option<String>,
    /// The service that sent the request on the user's behalf (`X-Service-Token`).
    service: Option<ServiceCaller>,
    /// The only requests the token may make (a restricted credential), if limited.
    access_rules: Option<AccessRules>,
    /// A system-scoped caller (noauth's `OpenStack-System-Scope`): every
    /// rule is project-scoped, so the policy refuses it everything.
    system_scoped: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ServiceCaller {
    user_id: String,
    project_id: Option<String>,
    roles: Vec<String>,
}

impl Context {
    pub fn new(user_id: impl Into<String>, project_id: impl Into<String>, roles: Vec<String>) -> Context {
        Context {
            user_id: user_id.into(),
            project_id: project_id.into(),
            roles,
            user_domain_id: None,
            project_domain_id: None,
            service: None,
            access_rules: None,
            system_scoped: false,
        }
    }

    /// The caller with no token, where a route lets the policy decide
    /// (`/metrics`): no user, no project, no roles.
    pub fn anonymous() -> Context {
        Context::new("", "", Vec::new())
    }

    pub fn is_anonymous(&self) -> bool {
        self.user_id.is_empty()
    }

    /// Scoped to the system rather than a project: no rule admits it.
    pub fn is_system_scoped(&self) -> bool {
        self.system_scoped
    }
}

impl berth_policy::Credentials for Context {
    fn roles(&self) -> &[String] {
        &self.roles
    }
    fn service_roles(&self) -> &[String] {
        self.service.as_ref().map(|s| s.roles.as_slice()).unwrap_or_default()
    }
    fn attribute(&self, name: &str) -> Option<&str> {
        match name {
            "user_id" => Some(&self.user_id),
            "project_id" => Some(&self.project_id),
            "domain_id" | "user_domain_id" => self.user_domain_id.as_deref(),
            "project_domain_id" => self.project_domain_id.as_deref(),
            "is_admin" => {
                Some(if self.roles.iter().any(|r| r.eq_ignore_ascii_case("admin")) { "True" } else { "False" })
            }
            "service_user_id" => self.service.as_ref().map(|s| s.user_id.as_str()),
            "service_project_id" => self.service.as_ref().and_then(|s| s.project_id.as_deref()),
            _ => None,
        }
    }
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No token.
    Missing,
    /// A token that is not valid (401).
    Invalid(ErrorCode, String),
    /// The identity service could not answer (503).
    Unavailable(String),
}

/// How requests are authenticated.
pub enum Authenticator {
    Noauth,
    Keystone(Box<keystone::Keystone>),
    Jwt(Box<jwt::Jwt>),
}

impl Authenticator {
    /// The mode, as the configuration names it.
    pub fn mode(&self) -> AuthMode {
        match self {
            Authenticator::Noauth => AuthMode::Noauth,
            Authenticator::Keystone(_) => AuthMode::Keystone,
            Authenticator::Jwt(_) => AuthMode::Jwt,
        }
    }

    /// The caller of `method` on `path` (as the client sent it);
    /// `Failure::Missing` when it sent no token. A token longer than
    /// [`MAX_TOKEN`] is refused before anything else, and a token whose
    /// access rules do not allow this request is refused as not valid here.
    pub async fn authenticate(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<Context, Failure> {
        if TOKEN_HEADERS.iter().any(|h| headers.get(h).is_some_and(|v| v.len() > MAX_TOKEN)) {
            return Err(Failure::Invalid(
                ErrorCode::BadToken,
                format!("The token is longer than Berth accepts ({MAX_TOKEN} bytes)."),
            ));
        }
        let ctx = match self {
            Authenticator::Noauth => noauth::context(headers),
            Authenticator::Keystone(k) => k.authenticate(headers).await,
            Authenticator::Jwt(j) => j.authenticate(headers).await,
        }?;
        if let Some(rules) = &ctx.access_rules {
            if !rules.allow(method, path) {
                return Err(Failure::Invalid(
                    ErrorCode::AccessRules,
                    format!("The token's access rules do not allow {method} {path}."),
                ));
            }
        }
        crate::access_log::record_caller(&ctx.project_id, &ctx.user_id);
        Ok(ctx)
    }

    /// `WWW-Authenticate` of a 401: where to get a token.
    fn challenge(&self) -> Option<HeaderValue> {
        match self {
            Authenticator::Noauth => None,
            Authenticator::Keystone(k) => k.challenge(),
            Authenticator::Jwt(_) => Some(HeaderValue::from_static("Bearer")),
        }
    }

    /// Why a request without a token is refused: OpenStack's sentence,
    /// and under noauth how the token names the caller, since no identity
    /// service is there to say it.
    fn missing(&self) -> String {
        let sentence = "The request you have made requires authentication.";
        match self {
            Authenticator::Noauth => format!(
                "{sentence} This berthd runs without an identity service (noauth): send X-Auth-Token: \
                 user:project (the token admin is an administrator)."
            ),
            Authenticator::Keystone(_) | Authenticator::Jwt(_) => sentence.to_string(),
        }
    }

    /// The response to a failure.
    pub fn reject(&self, failure: Failure) -> Rejection {
        let (status, code, detail, retry_after) = match failure {
            Failure::Missing => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated, self.missing(), None),
            Failure::Invalid(code, why) => (StatusCode::UNAUTHORIZED, code, why, None),
            Failure::Unavailable(why) => {
                tracing::warn!(error = %why, "identity service unavailable");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::AuthUnavailable,
                    "The identity service is unavailable; try again shortly.".to_string(),
                    Some(self.retry_after()),
                )
            }
        };
        let mut headers = HeaderMap::new();
        if status == StatusCode::UNAUTHORIZED {
            if let Some(c) = self.challenge() {
                headers.insert(header::WWW_AUTHENTICATE, c);
            }
        }
        if let Some(s) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        Rejection { error: ApiError::new(status, code, detail), headers }
    }

    fn retry_after(&self) -> u64 {
        match self {
            Authenticator::Keystone(k) => k.retry_after_s(),
            _ => 5,
        }
    }
}

/// A refused authentication: the error in the route's document, with
/// `WWW-Authenticate` or `Retry-After`.
#[derive(Debug)]
pub struct Rejection {
    error: ApiError,
    headers: HeaderMap,
}

impl Rejection {
    /// In Placement's error document.
    pub fn placement(mut self) -> Self {
        self.error = self.error.placement();
        self
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let mut resp = self.error.into_response();
        resp.headers_mut().extend(self.headers);
        resp
    }
}

impl FromRequestParts<crate::AppState> for Context {
    type Rejection = Rejection;

    /// Authenticates once per request: Placement's middleware has done so
    /// already for its routes.
    async fn from_request_parts(parts: &mut Parts, state: &crate::AppState) -> Result<Self, Self::Rejection> {
        if let Some(ctx) = parts.extensions.get::<Context>() {
            return Ok(ctx.clone());
        }
        match state.auth.authenticate(&parts.method, asked_path(parts), &parts.headers).await {
            Ok(ctx) => {
                parts.extensions.insert(ctx.clone());
                Ok(ctx)
            }
            Err(f) => Err(state.auth.reject(f)),
        }
    }
}

/// The caller, or [`Context::anonymous`] when it sent no token, for routes
/// the policy may open to anyone.
pub struct MaybeAnonymous(pub Context);

impl FromRequestParts<crate::AppState> for MaybeAnonymous {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &crate::AppState) -> Result<Self, Self::Rejection> {
        match state.auth.authenticate(&parts.method, asked_path(parts), &parts.headers).await {
            Ok(ctx) => Ok(MaybeAnonymous(ctx)),
            Err(Failure::Missing) => Ok(MaybeAnonymous(Context::anonymous())),
            Err(f) => Err(state.auth.reject(f)),
        }
    }
}

/// The path the client asked for: a nested router sees only the rest of it.
fn asked_path(parts: &Parts) -> &str {
    parts.extensions.get::<OriginalUri>().map_or(parts.uri.path(), |u| u.0.path())
}
