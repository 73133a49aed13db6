//! The driver's Keystone session: a project-scoped token for Berth's
//! service user, and the compute endpoint its catalog names. The same
//! credentials as `[keystone]` (berthd lends them when the driver names no
//! `auth_url`); berth-api's own token is unscoped to any catalog (it asks
//! `nocatalog`) and lives above this crate, so the driver holds its own.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use super::OpenStackConfig;
use crate::driver::failure_text;
use crate::plugin::HookError;

/// A token and the compute endpoint its catalog names.
#[derive(Clone)]
pub(super) struct Session {
    pub token: String,
    pub compute: String,
    renew_at: Instant,
}

#[derive(Deserialize)]
struct TokenDoc {
    token: TokenBody,
}
#[derive(Deserialize)]
struct TokenBody {
    issued_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    #[serde(default)]
    catalog: Vec<CatalogEntry>,
}
#[derive(Deserialize)]
struct CatalogEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
}
#[derive(Deserialize)]
struct Endpoint {
    interface: String,
    url: String,
    #[serde(default)]
    region_id: Option<String>,
    #[serde(default)]
    region: Option<String>,
}

/// Renew the token this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

pub(super) struct Keystone {
    auth_url: String,
    auth_body: Value,
    interface: String,
    region: Option<String>,
    http: reqwest::Client,
    held: tokio::sync::Mutex<Option<Session>>,
}

impl Keystone {
    pub(super) fn new(config: &OpenStackConfig, http: reqwest::Client) -> Result<Keystone, String> {
        Ok(Keystone {
            auth_url: config.auth_url.clone(),
            auth_body: auth_body(config)?,
            interface: config.interface.clone(),
            region: config.region.clone(),
            http,
            held: tokio::sync::Mutex::new(None),
        })
    }

    /// The held session unless it ends within a minute or `renew` says
    /// Nova refused its token.
    pub(super) async fn session(&self, renew: bool) -> Result<Session, HookError> {
        let mut held = self.held.lock().await;
        if let Some(s) = held.as_ref() {
            if Instant::now() < s.renew_at && !renew {
                return Ok(s.clone());
            }
        }
        let url = format!("{}/auth/tokens", self.auth_url.trim_end_matches('/'));
        let resp = self
            .http
            .post(&url)
            .json(&self.auth_body)
            .send()
            .await
            .map_err(|e| HookError::retryable(format!("Keystone {url}: {e}")))?;
        let status = resp.status();
        if status != StatusCode::CREATED {
            let text = resp.text().await.unwrap_or_default();
            let message =
                format!("Keystone answered {status} to Berth's credentials: {}", failure_text(text.as_bytes()));
            // Wrong credentials are the operator's to mend; an unwell Keystone may come back.
            return Err(if status.is_server_error() {
                HookError::retryable(message)
            } else {
                HookError::permanent(message)
            });
        }
        let token = resp
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| HookError::retryable("Keystone gave no X-Subject-Token"))?;
        let doc: TokenDoc =
            resp.json().await.map_err(|e| HookError::retryable(format!("reading Keystone's token: {e}")))?;
        let region_ok =
            |e: &Endpoint| self.region.as_ref().is_none_or(|r| e.region_id.as_ref().or(e.region.as_ref()) == Some(r));
        let compute = doc
            .token
            .catalog
            .iter()
            .filter(|c| c.kind == "compute")
            .flat_map(|c| &c.endpoints)
            .find(|e| e.interface == self.interface && region_ok(e))
            .map(|e| e.url.trim_end_matches('/').to_string())
            .ok_or_else(|| {
                HookError::permanent(format!(
                    "Keystone's catalog has no {} compute endpoint{}",
                    self.interface,
                    self.region.as_ref().map(|r| format!(" in region {r}")).unwrap_or_default()
                ))
            })?;
        // Measured on this host's monotonic clock: the token's lifetime as
        // Keystone states it, so a skewed wall clock does not matter.
        let lifetime = doc.token.expires_at.signed_duration_since(doc.token.issued_at).to_std().unwrap_or_default();
        let now = Instant::now();
        let renew_at = now.checked_add(lifetime.saturating_sub(RENEW_BEFORE)).unwrap_or(now);
        let s = Session { token, compute, renew_at };
        *held = Some(s.clone());
        Ok(s)
    }
}

/// The body of `POST /v3/auth/tokens`.
fn auth_body(config: &OpenStackConfig) -> Result<Value, String> {
    if let (Some(id), Some(secret)) = (&config.application_credential_id, &config.application_credential_secret) {
        return Ok(json!({"auth": {"identity": {
            "methods": ["application_credential"],
            "application_credential": {"id": id, "secret": secret},
        }}}));
    }
    let (Some(user), Some(password), Some(project)) = (&config.username, &config.password, &config.project_name) else {
        return Err("openstack needs username, password and project_name, or application_credential_id and \
                    application_credential_secret"
            .into());
    };
    Ok(json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "password": password, "domain": {"name": config.user_domain_name},
        }}},
        "scope": {"project": {"name": project, "domain": {"name": config.project_domain_name}}},
    }}))
}
