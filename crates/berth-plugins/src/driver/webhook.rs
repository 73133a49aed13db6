//! The `webhook` driver: POSTs the call as JSON to a configured URL.
//!
//! Headers: `Idempotency-Key` (the same on every attempt of the same effect),
//! `X-Berth-Action`, and, when a secret is configured,
//! `X-Berth-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>`.
//! 2xx is done; 408, 429 and 5xx, timeouts and connection failures may be
//! retried; every other status is a permanent failure. Redirects are not
//! followed: a POST silently turned into a GET would lose the call.

use std::time::Duration;

use async_trait::async_trait;
use hmac::{KeyInit, Mac};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::StatusCode;

use super::{config_error, failure_text, parse_answer, Driver, Envelope, WebhookConfig};
use crate::plugin::HookError;

pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
pub const SIGNATURE_HEADER: &str = "X-Berth-Signature";
pub const ACTION_HEADER: &str = "X-Berth-Action";

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// `sha256=<lowercase hex>` of HMAC-SHA256(`secret`, `body`): the value of
/// the signature header, for receivers written in Rust and for tests.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + 2 * digest.len());
    out.push_str("sha256=");
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

pub struct WebhookDriver {
    config: WebhookConfig,
    url: reqwest::Url,
    client: reqwest::Client,
    headers: HeaderMap,
}

impl WebhookDriver {
    pub fn new(config: WebhookConfig) -> Result<Self, berth_core::Error> {
        let url =
            reqwest::Url::parse(&config.url).map_err(|e| config_error(format!("webhook url {:?}: {e}", config.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(config_error(format!("webhook url {:?}: only http and https are supported", config.url)));
        }
        if config.timeout_ms == 0 {
            return Err(config_error("webhook timeout_ms must be more than 0"));
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &config.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| config_error(format!("webhook header name {k:?}: {e}")))?;
            let value =
                HeaderValue::from_str(v).map_err(|e| config_error(format!("webhook header {k:?} value: {e}")))?;
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("berth/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| config_error(format!("webhook client: {e}")))?;
        Ok(WebhookDriver { config, url, client, headers })
    }

    fn request_headers(&self, action: &str, idempotency_key: &str, body: &[u8]) -> Result<HeaderMap, HookError> {
        let mut h = self.headers.clone();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let value = |what: &str, v: &str| {
            HeaderValue::from_str(v)
                .map_err(|_| HookError::permanent(format!("{what} {v:?} cannot be sent as a header")))
        };
        h.insert(IDEMPOTENCY_KEY_HEADER, value("idempotency key", idempotency_key)?);
        h.insert(ACTION_HEADER, value("action", action)?);
        if let Some(secret) = &self.config.secret {
            h.insert(SIGNATURE_HEADER, value("signature", &sign(secret.as_bytes(), body))?);
        }
        Ok(h)
    }
}

/// Whether a status the far side answered may change on a later attempt.
fn retryable_status(s: StatusCode) -> bool {
    s.is_server_error() || s == StatusCode::REQUEST_TIMEOUT || s == StatusCode::TOO_MANY_REQUESTS
}

#[async_trait]
impl Driver for WebhookDriver {
    fn kind(&self) -> &'static str {
        "webhook"
    }

    async fn call(
        &self,
        action: &str,
        payload: &serde_json::Value,
        idempotency_key: &str,
    ) -> Result<serde_json::Value, HookError> {
        let envelope = Envelope {
            action: action.to_string(),
            idempotency_key: idempotency_key.to_string(),
            payload: payload.clone(),
        };
        let body = serde_json::to_vec(&envelope).map_err(|e| HookError::permanent(format!("encoding: {e}")))?;
        let headers = self.request_headers(action, idempotency_key, &body)?;
        let target = format!("webhook {}", redacted(&self.url));
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                HookError::retryable(format!("no answer within {} ms ({target})", self.config.timeout_ms))
            } else if e.is_builder() {
                HookError::permanent(format!("{e} ({target})"))
            } else {
                // Connection refused or reset, DNS, TLS, a body cut short:
                // the far side may be back on a later attempt.
                HookError::retryable(format!("{} ({target})", error_chain(&e)))
            }
        };
        let response =
            self.client.post(self.url.clone()).headers(headers).body(body).send().await.map_err(transport)?;
        let status = response.status();
        let answer = response.bytes().await.map_err(transport)?;
        tracing::debug!(driver = "webhook", action, idempotency_key, status = status.as_u16(), "called");
        if status.is_success() {
            return parse_answer(&answer, &target);
        }
        let message = format!("{} ({target}: {status})", failure_text(&answer));
        Err(if retryable_status(status) { HookError::retryable(message) } else { HookError::permanent(message) })
    }
}

/// The URL as messages show it: no credentials, no query (either may hold a
/// token), since failure messages end up in lease events users can read.
fn redacted(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// reqwest's own message is often just "error sending request"; the cause
/// (connection refused…) is further down the chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_rfc4231_test_case_2() {
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn messages_do_not_show_credentials() {
        let u = reqwest::Url::parse("https://user:pw@example.test:8443/hook?token=abc").unwrap();
        assert_eq!(redacted(&u), "https://example.test:8443/hook");
    }

    #[test]
    fn statuses_classify() {
        for s in [500, 502, 503, 504, 408, 429] {
            assert!(retryable_status(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [400, 401, 403, 404, 409, 422, 301] {
            assert!(!retryable_status(StatusCode::from_u16(s).unwrap()), "{s}");
        }
    }
}
