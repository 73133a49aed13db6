//! Where notifications go: the log (a tracing target) and webhooks.

use std::time::Duration;

use berth_plugins::driver::{sign, ACTION_HEADER, IDEMPOTENCY_KEY_HEADER, SIGNATURE_HEADER};
use reqwest::header::CONTENT_TYPE;
use reqwest::StatusCode;

use crate::blazar::Notification;
use crate::config::SinkConfig;

/// The tracing target of the log sink.
pub const LOG_TARGET: &str = "berth::notifications";

pub enum Sink {
    Log,
    Webhook(Webhook),
}

/// Why a delivery failed, and whether the same notification may get
/// through later (the sink is down or slow) or never will (it refuses it).
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub refused: bool,
}

impl Sink {
    pub fn new(config: &SinkConfig) -> Result<Sink, String> {
        Ok(match config {
            SinkConfig::Log => Sink::Log,
            SinkConfig::Webhook { url, secret, timeout_ms } => {
                Sink::Webhook(Webhook::new(url, secret.clone(), *timeout_ms)?)
            }
        })
    }

    /// The sink's kind, as `/metrics` labels it.
    pub fn kind(&self) -> &'static str {
        match self {
            Sink::Log => "log",
            Sink::Webhook(_) => "webhook",
        }
    }

    pub async fn deliver(&self, n: &Notification) -> Result<(), Failure> {
        match self {
            Sink::Log => {
                tracing::info!(
                    target: LOG_TARGET,
                    event_type = %n.event_type,
                    message_id = %n.message_id,
                    notification = %n.body,
                    "lease notification"
                );
                Ok(())
            }
            Sink::Webhook(w) => w.post(n).await,
        }
    }
}

pub struct Webhook {
    url: reqwest::Url,
    secret: Option<String>,
    timeout_ms: u64,
    client: reqwest::Client,
}

impl Webhook {
    pub fn new(url: &str, secret: Option<String>, timeout_ms: u64) -> Result<Webhook, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("webhook url {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("webhook url {url:?}: only http and https are supported"));
        }
        if timeout_ms == 0 {
            return Err("webhook timeout_ms must be more than 0".into());
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("berth/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("webhook client: {e}"))?;
        Ok(Webhook { url: parsed, secret, timeout_ms, client })
    }

    /// One POST: the body signed as the plugins' webhook driver signs its
    /// calls, the message id as the idempotency key, the event type as the
    /// action.
    async fn post(&self, n: &Notification) -> Result<(), Failure> {
        let body = serde_json::to_vec(&n.body).expect("notifications serialize");
        let mut request = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_KEY_HEADER, &n.message_id)
            .header(ACTION_HEADER, &n.event_type);
        if let Some(secret) = &self.secret {
            request = request.header(SIGNATURE_HEADER, sign(secret.as_bytes(), &body));
        }
        let host = self.url.host_str().unwrap_or_default().to_string();
        let down = |e: reqwest::Error| Failure {
            message: if e.is_timeout() {
                format!("no answer within {} ms from {host}", self.timeout_ms)
            } else {
                format!("{host}: {}", chain(&e))
            },
            refused: false,
        };
        let response = request.body(body).send().await.map_err(down)?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let busy = status.is_server_error()
            || status == StatusCode::REQUEST_TIMEOUT
            || status == StatusCode::TOO_MANY_REQUESTS;
        Err(Failure { message: format!("{host} answered {status}"), refused: !busy })
    }
}

/// reqwest's own message is often just "error sending request"; the cause
/// (connection refused…) is further down.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}
