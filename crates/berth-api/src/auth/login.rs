//! A login on a user's behalf, as Horizon does: the console sends a user,
//! password and project, and Berth asks Keystone for a token scoped to that
//! project (`POST /v3/auth/tokens`, password method). Berth keeps nothing:
//! the token goes back to the browser, which sends it as any client would.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;

use super::keystone::Keystone;
use super::Failure;
use berth_core::error::ErrorCode;

/// What a user typed.
pub struct Credentials<'a> {
    pub user: &'a str,
    pub password: &'a str,
    pub project: &'a str,
    pub user_domain: &'a str,
    pub project_domain: &'a str,
}

/// A token Keystone issued.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub user_id: String,
    pub project_id: String,
}

#[derive(Deserialize)]
struct Doc {
    token: Token,
}

#[derive(Deserialize)]
struct Token {
    expires_at: DateTime<Utc>,
    user: Id,
    project: Option<Id>,
}

#[derive(Deserialize)]
struct Id {
    id: String,
}

impl Keystone {
    /// Keystone's token for `c`, scoped to its project; `Failure::Invalid`
    /// when Keystone refuses the credentials, `Unavailable` when it cannot
    /// answer.
    pub async fn login(&self, c: &Credentials<'_>) -> Result<Issued, Failure> {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": c.user, "password": c.password, "domain": {"name": c.user_domain},
            }}},
            "scope": {"project": {"name": c.project, "domain": {"name": c.project_domain}}},
        }});
        let resp = self
            .http()
            .post(self.url("/auth/tokens?nocatalog"))
            .json(&body)
            .send()
            .await
            .map_err(|e| Failure::Unavailable(format!("logging a user in: {e}")))?;
        match resp.status() {
            StatusCode::CREATED => {}
            // Keystone says no more than that: which part was wrong stays unsaid.
            StatusCode::UNAUTHORIZED | StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => {
                return Err(Failure::Invalid(
                    ErrorCode::Unauthenticated,
                    "Keystone refused these credentials for this project.".into(),
                ))
            }
            s => return Err(Failure::Unavailable(format!("Keystone answered {s} to a login"))),
        }
        let token = resp
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Failure::Unavailable("Keystone gave no X-Subject-Token".into()))?;
        let doc: Doc = resp.json().await.map_err(|e| Failure::Unavailable(format!("reading a login's token: {e}")))?;
        let project = doc
            .token
            .project
            .ok_or_else(|| Failure::Invalid(ErrorCode::BadToken, "Keystone gave a token with no project.".into()))?;
        Ok(Issued { token, expires_at: doc.token.expires_at, user_id: doc.token.user.id, project_id: project.id })
    }
}
