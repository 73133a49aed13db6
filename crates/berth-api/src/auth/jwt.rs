//! OpenID Connect / JWT bearer tokens (`Authorization: Bearer …`, or
//! `X-Auth-Token` for OpenStack clients), checked with the jsonwebtoken
//! crate against a JWKS read from a file or fetched from a URL (at start,
//! and again when a token names a key it does not hold, at most once per
//! `refetch_interval_s`).
//!
//! A key's own type fixes the one algorithm it verifies (RSA: RS256, EC
//! P-256: ES256, Ed25519: EdDSA), so `alg: none`, HS256 signed with a public
//! key and any other switch of algorithm are refused; symmetric keys in the
//! set are ignored. `iss`, `aud`, `exp` and `nbf` are checked with
//! `leeway_s`. Which claims name the user, the project and the roles is
//! configurable. A refused token is never logged.
//!
//! A token with an `access_rules` claim (`access_rules_claim`; Keystone's
//! shape: a list of `{service, method, path}`) may make only the requests
//! those rules allow, as a restricted application credential. OAuth's
//! `scope` claim is not read: its values (`openid profile …`) name what a
//! client may learn of the user, not which requests it may make.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use berth_core::error::ErrorCode;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::access_rules::{AccessRule, AccessRules};
use super::{noauth, Context, Failure};

/// `[jwt]` in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// The key set: a JSON file...
    pub jwks_file: Option<PathBuf>,
    /// ...or the issuer's `jwks_uri`.
    pub jwks_url: Option<String>,
    /// The one issuer (`iss`) accepted.
    pub issuer: String,
    /// Audiences (`aud`) accepted: a token must name one of them.
    pub audience: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf` (seconds).
    pub leeway_s: u64,
    /// Claims naming the user, the project and the roles (a list, or a
    /// string of names separated by spaces or commas).
    pub user_claim: String,
    pub project_claim: String,
    pub roles_claim: String,
    /// The claim that restricts a token to the requests its rules allow.
    pub access_rules_claim: String,
    /// A token naming an unknown key refetches the set at most this often (seconds).
    pub refetch_interval_s: u64,
    /// Fetching the key set gives up after this long (milliseconds).
    pub timeout_ms: u64,
}

impl Default for JwtConfig {
    fn default() -> Self {
        JwtConfig {
            jwks_file: None,
            jwks_url: None,
            issuer: String::new(),
            audience: Vec::new(),
            leeway_s: 60,
            user_claim: "sub".into(),
            project_claim: "project_id".into(),
            roles_claim: "roles".into(),
            access_rules_claim: "access_rules".into(),
            refetch_interval_s: 60,
            timeout_ms: 5_000,
        }
    }
}

/// A key of the set, ready to verify.
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

struct Keys {
    keys: Vec<Key>,
    fetched: Instant,
}

pub struct Jwt {
    cfg: JwtConfig,
    http: reqwest::Client,
    keys: tokio::sync::RwLock<Keys>,
}

impl Jwt {
    /// Reads (or fetches) the key set; refuses a configuration that could
    /// accept tokens of anyone.
    pub async fn new(cfg: JwtConfig) -> Result<Jwt, String> {
        if cfg.issuer.is_empty() || cfg.audience.is_empty() {
            return Err("[jwt] needs issuer and audience".into());
        }
        if cfg.jwks_file.is_some() == cfg.jwks_url.is_some() {
            return Err("[jwt] needs one of jwks_file and jwks_url".into());
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        let jwt = Jwt { cfg, http, keys: tokio::sync::RwLock::new(Keys { keys: Vec::new(), fetched: Instant::now() }) };
        let keys = jwt.load().await?;
        if keys.is_empty() {
            return Err("[jwt] the key set holds no RS256, ES256 or EdDSA key".into());
        }
        jwt.keys.write().await.keys = keys;
        Ok(jwt)
    }

    async fn load(&self) -> Result<Vec<Key>, String> {
        let text = match (&self.cfg.jwks_file, &self.cfg.jwks_url) {
            (Some(f), _) => std::fs::read_to_string(f).map_err(|e| format!("[jwt] jwks_file {}: {e}", f.display()))?,
            (None, Some(url)) => {
                let resp = self.http.get(url).send().await.map_err(|e| format!("[jwt] jwks_url {url}: {e}"))?;
                if !resp.status().is_success() {
                    return Err(format!("[jwt] jwks_url {url} answered {}", resp.status()));
                }
                resp.text().await.map_err(|e| format!("[jwt] jwks_url {url}: {e}"))?
            }
            (None, None) => unreachable!("checked in new"),
        };
        let set: JwkSet = serde_json::from_str(&text).map_err(|e| format!("[jwt] the key set is not a JWKS: {e}"))?;
        Ok(set.keys.iter().filter_map(usable).collect())
    }

    pub(super) async fn authenticate(&self, headers: &HeaderMap) -> Result<Context, Failure> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        let token = bearer
            .or_else(|| headers.get("x-auth-token").and_then(|v| v.to_str().ok()))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Failure::Missing)?;
        let head = jsonwebtoken::decode_header(token).map_err(|_| invalid("The token is not a JWT Berth accepts."))?;
        let claims = match self.verify(token, &head).await {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                tracing::debug!(error = %e, kid = ?head.kid, "JWT refused");
                return Err(invalid("The token is not valid."));
            }
            None => {
                tracing::debug!(kid = ?head.kid, alg = ?head.alg, "JWT names no key Berth holds");
                return Err(invalid("The token is signed with a key Berth does not know."));
            }
        };
        self.context(&claims)
    }

    /// `None` when no key of the set (refetched if allowed) matches.
    async fn verify(&self, token: &str, head: &jsonwebtoken::Header) -> Option<jsonwebtoken::errors::Result<Value>> {
        if let Some(r) = self.try_keys(token, head).await {
            return Some(r);
        }
        // A key set from a file is all there is.
        self.cfg.jwks_url.as_ref()?;
        {
            let mut keys = self.keys.write().await;
            if keys.fetched.elapsed() < Duration::from_secs(self.cfg.refetch_interval_s) {
                return None;
            }
            keys.fetched = Instant::now();
            match self.load().await {
                Ok(k) => keys.keys = k,
                Err(e) => tracing::warn!(error = %e, "refetching the JWT key set"),
            }
        }
        self.try_keys(token, head).await
    }

    async fn try_keys(&self, token: &str, head: &jsonwebtoken::Header) -> Option<jsonwebtoken::errors::Result<Value>> {
        let keys = self.keys.read().await;
        let key = keys.keys.iter().find(|k| k.algorithm == head.alg && (head.kid.is_none() || k.kid == head.kid))?;
        let mut v = Validation::new(key.algorithm);
        v.set_issuer(&[&self.cfg.issuer]);
        v.set_audience(&self.cfg.audience);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.leeway = self.cfg.leeway_s;
        v.validate_nbf = true;
        Some(jsonwebtoken::decode::<Value>(token, &key.key, &v).map(|d| d.claims))
    }

    fn context(&self, claims: &Value) -> Result<Context, Failure> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let user =
            text(&self.cfg.user_claim).ok_or_else(|| bad(format!("the token has no {}", self.cfg.user_claim)))?;
        let project =
            text(&self.cfg.project_claim).ok_or_else(|| bad(format!("the token has no {}", self.cfg.project_claim)))?;
        let roles: Vec<&str> = match claims.get(&self.cfg.roles_claim) {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(s)) => s.split([' ', ',']).filter(|r| !r.is_empty()).collect(),
            _ => Vec::new(),
        };
        let roles = roles.into_iter().map(|r| noauth::id("role", r).map(str::to_string)).collect::<Result<_, _>>()?;
        let mut ctx = Context::new(noauth::id("user", user)?, noauth::id("project", project)?, roles);
        // A restriction that cannot be read restricts to nothing: refused.
        ctx.access_rules = match claims.get(&self.cfg.access_rules_claim) {
            None | Some(Value::Null) => None,
            Some(v) => Some(AccessRules::new(Vec::<AccessRule>::deserialize(v).map_err(|_| {
                bad(format!("the token's {} claim is not a list of access rules", self.cfg.access_rules_claim))
            })?)),
        };
        Ok(ctx)
    }
}

/// The algorithm a key verifies, from its own type; `None` for keys Berth
/// does not take (symmetric, other curves, or a declared `alg` that
/// contradicts the type).
fn usable(jwk: &Jwk) -> Option<Key> {
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => Algorithm::EdDSA,
        _ => return None,
    };
    if let Some(declared) = jwk.common.key_algorithm {
        if declared.to_string() != format!("{algorithm:?}") {
            return None;
        }
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key { kid: jwk.common.key_id.clone(), algorithm, key })
}

fn invalid(why: &str) -> Failure {
    Failure::Invalid(ErrorCode::Unauthenticated, why.into())
}

fn bad(why: String) -> Failure {
    Failure::Invalid(ErrorCode::BadToken, why)
}
