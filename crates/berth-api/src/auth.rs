//! Who is calling: a request context of user, project and roles.
//!
//! `noauth` follows OpenStack's noauth2 rules: `X-Auth-Token: user[:project]`;
//! the token `admin` has the admin role; `X-Roles`, when present, sets the
//! roles. Meant for local use only.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Deserialize;

use crate::error::{codes, ApiError};

/// Keystone's bound on user and project ids; a longer id from a token is
/// refused before it reaches a query or an index.
pub const MAX_TOKEN_ID: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    Noauth,
    Jwt,
}

impl std::str::FromStr for AuthMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "noauth" => Ok(AuthMode::Noauth),
            "jwt" => Ok(AuthMode::Jwt),
            other => Err(format!("unknown auth mode {other:?}: use noauth or jwt")),
        }
    }
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub user_id: String,
    pub project_id: String,
    pub roles: Vec<String>,
}

impl Context {
    pub fn is_admin(&self) -> bool {
        self.has_role("admin")
    }
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
    /// Admin or service: may write Placement's inventory and allocations.
    pub fn is_admin_or_service(&self) -> bool {
        self.is_admin() || self.has_role("service")
    }
}

/// Reads the noauth2 headers into a context; `None` when no token was sent,
/// a 400 when its ids are not ids.
pub fn noauth_context(parts: &Parts) -> Result<Option<Context>, ApiError> {
    let Some(token) = parts.headers.get("x-auth-token").and_then(|v| v.to_str().ok()).map(str::trim) else {
        return Ok(None);
    };
    if token.is_empty() {
        return Ok(None);
    }
    let (user, project) = match token.split_once(':') {
        Some((u, p)) => (u.to_string(), p.to_string()),
        None => (token.to_string(), token.to_string()),
    };
    check_token_id("user id", &user)?;
    check_token_id("project id", &project)?;
    let roles = match parts.headers.get("x-roles").and_then(|v| v.to_str().ok()) {
        Some(r) => r.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None if user == "admin" => vec!["admin".to_string(), "member".to_string(), "reader".to_string()],
        None => vec!["member".to_string(), "reader".to_string()],
    };
    Ok(Some(Context { user_id: user, project_id: project, roles }))
}

/// An id from a token: no control character, at most [`MAX_TOKEN_ID`]
/// characters.
fn check_token_id(what: &str, id: &str) -> Result<(), ApiError> {
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(ApiError::bad_request(
            codes::CONTROL_CHARACTER,
            format!("the token's {what} contains the control character U+{:04X}", c as u32),
        ));
    }
    if id.chars().count() > MAX_TOKEN_ID {
        return Err(ApiError::bad_request(
            codes::TOO_LONG,
            format!("the token's {what} is longer than {MAX_TOKEN_ID} characters"),
        ));
    }
    Ok(())
}

impl FromRequestParts<crate::AppState> for Context {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &crate::AppState) -> Result<Self, Self::Rejection> {
        match *state.auth {
            AuthMode::Noauth => noauth_context(parts)?.ok_or_else(ApiError::unauthenticated),
            AuthMode::Jwt => Err(ApiError::unauthenticated()),
        }
    }
}
