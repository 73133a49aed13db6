//! Keystone tokens, validated as keystonemiddleware's `auth_token` does.
//!
//! Berth holds a token of its own (password or application credential, from
//! `[keystone]`), renews it a minute before it expires and once when Keystone
//! answers 401 with it, and asks `GET /v3/auth/tokens` about each caller's
//! token (`X-Subject-Token`). Answers are cached for `cache_ttl_s` (never
//! past the token's own expiry), keyed by a hash of the token, so a revoked
//! token is refused only once its entry ends. A service may act with a
//! user's token by sending its own in `X-Service-Token`: that one must be
//! valid and hold one of `service_token_roles`, and then the user's token is
//! accepted even if it expired meanwhile (never if it was revoked).
//!
//! A token made from an application credential with access rules carries
//! them (Berth asks with `OpenStack-Identity-Access-Rules: 1`, a promise to
//! enforce them): the context keeps them, and [`super::Authenticator`]
//! refuses any request they do not allow, unless a valid service token came
//! with it (a chain of services, as keystonemiddleware has it).
//!
//! Keystone unreachable, slow past `timeout_ms`, or answering an error: 503
//! with `Retry-After`, never a 401 and never a hang. An answer that says the
//! subject token itself is malformed (400, 413, 431) is a 401.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use berth_core::error::ErrorCode;
use berth_core::time::DateMath;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::access_rules::{AccessRule, AccessRules};
use super::{Context, Failure, ServiceCaller};

/// `[keystone]` in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeystoneConfig {
    /// Keystone's v3 endpoint, e.g. `http://keystone:5000/v3`.
    pub auth_url: String,
    /// Password authentication of Berth's own user...
    pub username: Option<String>,
    pub password: Option<String>,
    pub user_domain_name: String,
    pub project_name: Option<String>,
    pub project_domain_name: String,
    /// ...or an application credential.
    pub application_credential_id: Option<String>,
    pub application_credential_secret: Option<String>,
    /// How long a validation is trusted (seconds; never past the token's expiry).
    pub cache_ttl_s: u64,
    /// At most this many validations are kept.
    pub cache_size: u64,
    /// Each call to Keystone gives up after this long (milliseconds).
    pub timeout_ms: u64,
    /// `Retry-After` of a 503 when Keystone cannot be reached (seconds).
    pub retry_after_s: u64,
    /// A service token must carry one of these roles...
    pub service_token_roles: Vec<String>,
    /// ...or it is refused (else it is only not honoured).
    pub service_token_roles_required: bool,
}

impl Default for KeystoneConfig {
    fn default() -> Self {
        KeystoneConfig {
            auth_url: String::new(),
            username: None,
            password: None,
            user_domain_name: "Default".into(),
            project_name: None,
            project_domain_name: "Default".into(),
            application_credential_id: None,
            application_credential_secret: None,
            cache_ttl_s: 300,
            cache_size: 10_000,
            timeout_ms: 5_000,
            retry_after_s: 5,
            service_token_roles: vec!["service".into()],
            service_token_roles_required: true,
        }
    }
}

impl KeystoneConfig {
    /// The body of `POST /v3/auth/tokens` for Berth's own token.
    fn auth_body(&self) -> Result<serde_json::Value, String> {
        if let (Some(id), Some(secret)) = (&self.application_credential_id, &self.application_credential_secret) {
            return Ok(json!({"auth": {"identity": {
                "methods": ["application_credential"],
                "application_credential": {"id": id, "secret": secret},
            }}}));
        }
        let (Some(user), Some(password), Some(project)) = (&self.username, &self.password, &self.project_name) else {
            return Err("[keystone] needs username, password and project_name, or application_credential_id and \
                        application_credential_secret"
                .into());
        };
        Ok(json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "password": password, "domain": {"name": self.user_domain_name},
            }}},
            "scope": {"project": {"name": project, "domain": {"name": self.project_domain_name}}},
        }}))
    }
}

/// What Keystone said about a token (the parts Berth uses).
#[derive(Debug, Clone, Deserialize)]
struct TokenDoc {
    token: Token,
}

#[derive(Debug, Clone, Deserialize)]
struct Token {
    user: Owner,
    project: Option<Owner>,
    #[serde(default)]
    roles: Vec<Role>,
    expires_at: DateTime<Utc>,
    application_credential: Option<ApplicationCredential>,
}

#[derive(Debug, Clone, Deserialize)]
struct ApplicationCredential {
    /// `None`: unrestricted; `Some([])`: allowed nothing.
    access_rules: Option<Vec<AccessRule>>,
}

#[derive(Debug, Clone, Deserialize)]
struct Owner {
    id: String,
    domain: Option<DomainRef>,
}

#[derive(Debug, Clone, Deserialize)]
struct DomainRef {
    id: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Role {
    name: String,
}

impl Token {
    fn roles(&self) -> Vec<String> {
        self.roles.iter().map(|r| r.name.clone()).collect()
    }
}

/// A cached validation and how long it may be trusted.
struct Entry {
    token: Token,
    ttl: Duration,
}

struct Ttl;

impl moka::Expiry<[u8; 32], Arc<Entry>> for Ttl {
    fn expire_after_create(&self, _: &[u8; 32], e: &Arc<Entry>, _: std::time::Instant) -> Option<Duration> {
        Some(e.ttl)
    }
}

struct OwnToken {
    token: String,
    expires_at: DateTime<Utc>,
}

/// Renew Berth's own token this long before it expires.
const RENEW_BEFORE: chrono::Duration = chrono::Duration::seconds(60);

pub struct Keystone {
    cfg: KeystoneConfig,
    auth_body: serde_json::Value,
    http: reqwest::Client,
    own: tokio::sync::Mutex<Option<OwnToken>>,
    cache: moka::future::Cache<[u8; 32], Arc<Entry>>,
    challenge: Option<HeaderValue>,
}

impl Keystone {
    pub fn new(cfg: KeystoneConfig) -> Result<Keystone, String> {
        if cfg.auth_url.is_empty() {
            return Err("[keystone] auth_url is required".into());
        }
        reqwest::Url::parse(&cfg.auth_url).map_err(|e| format!("[keystone] auth_url {:?}: {e}", cfg.auth_url))?;
        let auth_body = cfg.auth_body()?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .connect_timeout(Duration::from_millis(cfg.timeout_ms))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        let cache = moka::future::Cache::builder().max_capacity(cfg.cache_size).expire_after(Ttl).build();
        let challenge = HeaderValue::from_str(&format!("Keystone uri=\"{}\"", cfg.auth_url.trim_end_matches('/'))).ok();
        Ok(Keystone { cfg, auth_body, http, own: tokio::sync::Mutex::new(None), cache, challenge })
    }

    pub(super) fn challenge(&self) -> Option<HeaderValue> {
        self.challenge.clone()
    }

    pub(super) fn retry_after_s(&self) -> u64 {
        self.cfg.retry_after_s
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.cfg.auth_url.trim_end_matches('/'))
    }

    /// The HTTP client Berth talks to Keystone with (its timeouts).
    pub(super) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub(super) async fn authenticate(&self, headers: &HeaderMap) -> Result<Context, Failure> {
        let token =
            |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty());
        let Some(user_token) = token("x-auth-token") else { return Err(Failure::Missing) };
        let service = match token("x-service-token") {
            None => None,
            Some(t) => {
                let s = self.validate(t, false).await?.ok_or_else(|| invalid("The service token is not valid."))?;
                let roles = s.roles();
                let has_role =
                    roles.iter().any(|r| self.cfg.service_token_roles.iter().any(|w| w.eq_ignore_ascii_case(r)));
                match (has_role, self.cfg.service_token_roles_required) {
                    (true, _) => Some(s),
                    (false, true) => return Err(invalid("The service token lacks a service role.")),
                    (false, false) => None,
                }
            }
        };
        // With a valid service token, a user token that expired meanwhile still serves.
        let user =
            self.validate(user_token, service.is_some()).await?.ok_or_else(|| invalid("The token is not valid."))?;
        let Some(project) = &user.project else {
            return Err(Failure::Invalid(ErrorCode::BadToken, "Berth needs a project-scoped token.".into()));
        };
        let mut ctx = Context::new(user.user.id.clone(), project.id.clone(), user.roles());
        ctx.user_domain_id = user.user.domain.as_ref().map(|d| d.id.clone());
        ctx.project_domain_id = project.domain.as_ref().map(|d| d.id.clone());
        // A service token vouches for the chain of requests: the user's
        // credential's rules governed the request that started it.
        if service.is_none() {
            ctx.access_rules =
                user.application_credential.as_ref().and_then(|a| a.access_rules.clone()).map(AccessRules::new);
        }
        ctx.service = service.map(|s| ServiceCaller {
            user_id: s.user.id.clone(),
            project_id: s.project.as_ref().map(|p| p.id.clone()),
            roles: s.roles(),
        });
        Ok(ctx)
    }

    /// Keystone's word on `token`: `None` when it is not valid.
    async fn validate(&self, token: &str, allow_expired: bool) -> Result<Option<Token>, Failure> {
        let mut h = Sha256::new();
        h.update([u8::from(allow_expired)]);
        h.update(token.as_bytes());
        let key: [u8; 32] = h.finalize().into();
        if let Some(e) = self.cache.get(&key).await {
            return Ok(Some(e.token.clone()));
        }
        let Some(found) = self.ask(token, allow_expired).await? else { return Ok(None) };
        // How long this process may cache Keystone's answer: local to this
        // replica, and Keystone still decides every validation it is asked.
        #[allow(clippy::disallowed_methods)] // a cache lifetime, not a decision
        let left = (found.expires_at - Utc::now()).to_std().unwrap_or_default();
        let ttl = Duration::from_secs(self.cfg.cache_ttl_s);
        // An expired token accepted beside a service token is trusted for the TTL.
        let ttl = if allow_expired && left.is_zero() { ttl } else { ttl.min(left) };
        if !ttl.is_zero() {
            self.cache.insert(key, Arc::new(Entry { token: found.clone(), ttl })).await;
        }
        Ok(Some(found))
    }

    async fn ask(&self, token: &str, allow_expired: bool) -> Result<Option<Token>, Failure> {
        let mut url = self.url("/auth/tokens?nocatalog");
        if allow_expired {
            url.push_str("&allow_expired=1");
        }
        for renewed in [false, true] {
            let own = self.own_token(renewed).await?;
            let resp = self
                .http
                .get(&url)
                .header("x-auth-token", own)
                .header("x-subject-token", token)
                .header("openstack-identity-access-rules", "1")
                .send()
                .await
                .map_err(|e| unavailable("validating a token", &e))?;
            match resp.status() {
                StatusCode::OK => {
                    let doc: TokenDoc = resp.json().await.map_err(|e| unavailable("reading a validation", &e))?;
                    return Ok(Some(doc.token));
                }
                StatusCode::NOT_FOUND => return Ok(None),
                // Keystone could not read the subject token: a bad token, not an outage.
                StatusCode::BAD_REQUEST
                | StatusCode::PAYLOAD_TOO_LARGE
                | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => return Ok(None),
                StatusCode::UNAUTHORIZED if !renewed => continue,
                s => return Err(Failure::Unavailable(format!("Keystone answered {s} to a validation"))),
            }
        }
        Err(Failure::Unavailable("Keystone refused Berth's own token right after renewing it".into()))
    }

    /// Berth's own token: the held one unless it ends within a minute or
    /// `renew` says Keystone refused it.
    async fn own_token(&self, renew: bool) -> Result<String, Failure> {
        let mut own = self.own.lock().await;
        if let Some(t) = own.as_ref() {
            // Renewing early on a fast clock is harmless; a slow clock is
            // caught by Keystone's 401, which renews once.
            #[allow(clippy::disallowed_methods)] // when to renew our own token
            let fresh = t.expires_at.saturating_minus(RENEW_BEFORE) > Utc::now();
            if !renew && fresh {
                return Ok(t.token.clone());
            }
        }
        let resp = self
            .http
            .post(self.url("/auth/tokens?nocatalog"))
            .json(&self.auth_body)
            .send()
            .await
            .map_err(|e| unavailable("authenticating Berth", &e))?;
        if resp.status() != StatusCode::CREATED {
            // Berth's own credentials are wrong: an operator's problem, not the caller's.
            tracing::error!(status = %resp.status(), "Keystone refused Berth's own credentials ([keystone])");
            return Err(Failure::Unavailable(format!(
                "Keystone answered {} to Berth's own credentials",
                resp.status()
            )));
        }
        let token = resp
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Failure::Unavailable("Keystone gave no X-Subject-Token".into()))?;
        let doc: TokenDoc = resp.json().await.map_err(|e| unavailable("reading Berth's own token", &e))?;
        *own = Some(OwnToken { token: token.clone(), expires_at: doc.token.expires_at });
        Ok(token)
    }
}

fn invalid(why: &str) -> Failure {
    Failure::Invalid(ErrorCode::Unauthenticated, why.into())
}

fn unavailable(doing: &str, e: &reqwest::Error) -> Failure {
    Failure::Unavailable(format!("{doing}: {e}"))
}
