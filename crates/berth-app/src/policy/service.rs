//! Lease policy: the `[policy]` section of the daemon's configuration,
//! berth-core's built-in rules, and the optional external policy service.
//!
//! ```toml
//! [policy]
//! max_lease_duration = 86400      # seconds; absent or -1: no maximum
//! extension_window = 3600         # seconds before its end a lease may be extended
//! extension_cutoff = 3600         # no extension asked later than this before the end
//! min_extension = 3600            # an extension moves the end by at least this
//! exempt_projects = ["operators"]
//!
//! [policy.external]
//! url = "http://127.0.0.1:9100/v1/"   # check-create, check-update, on-end under it
//! token = "shared secret"             # sent as X-Auth-Token
//! timeout_ms = 5000
//! ```
//!
//! The external service speaks the protocol of Blazar's external service
//! enforcement filter: `POST check-create` with `{context, lease}`,
//! `POST check-update` with `{context, current_lease, lease}`, and
//! `POST on-end` with `{context, lease}`. 204 allows; 403 denies, with the
//! reason in `{"message": …}`. Anything else (another status, no answer in
//! time) denies too, with a generic message: a policy that cannot be asked
//! does not let leases through. Exempt projects are not sent to it.

use std::collections::BTreeSet;
use std::time::Duration;

use berth_core::error::ErrorCode;
use berth_core::policy::{self, LeasePolicy};
use berth_core::Error;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Said when the service's refusal carries no message, or it cannot be reached.
pub const GENERIC_DENIAL: &str = "the lease policy service did not allow this request";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Seconds; absent or -1: no maximum.
    pub max_lease_duration: Option<i64>,
    /// Seconds before its end within which a lease may be extended (past
    /// the maximum, by at most the maximum from its current end). Absent:
    /// the whole extended lease must fit the maximum.
    pub extension_window: Option<i64>,
    /// Seconds before its end after which a lease may no longer be
    /// extended. Absent: up to the end.
    pub extension_cutoff: Option<i64>,
    /// Seconds: the shortest extension. Absent: any.
    pub min_extension: Option<i64>,
    pub exempt_projects: Vec<String>,
    pub external: Option<ExternalPolicyConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalPolicyConfig {
    /// The base URL; `check-create`, `check-update` and `on-end` are resolved against it.
    #[serde(default)]
    pub url: Option<String>,
    /// Per-call overrides of the URLs.
    #[serde(default)]
    pub check_create_url: Option<String>,
    #[serde(default)]
    pub check_update_url: Option<String>,
    #[serde(default)]
    pub on_end_url: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    10_000
}

fn config_error(detail: impl Into<String>) -> Error {
    Error::invalid(ErrorCode::Invalid, format!("[policy] {}", detail.into()))
}

/// A lease as the policy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseValues {
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Each reservation as the client gave it (with its `resource_type`).
    pub reservations: Vec<Value>,
}

impl LeaseValues {
    /// A lease as recorded: its reservations as (resource type, parameters).
    pub fn of_record<'a>(
        name: &str,
        project_id: &str,
        user_id: &str,
        (start, end): (DateTime<Utc>, DateTime<Utc>),
        reservations: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) -> LeaseValues {
        LeaseValues {
            name: name.to_string(),
            project_id: project_id.to_string(),
            user_id: user_id.to_string(),
            start,
            end,
            reservations: reservations.into_iter().map(|(t, p)| LeaseValues::reservation(t, p)).collect(),
        }
    }

    /// A reservation as a client gives it: its parameters with its
    /// `resource_type`.
    pub fn reservation(resource_type: &str, params: &Value) -> Value {
        let mut o = params.as_object().cloned().unwrap_or_default();
        o.insert("resource_type".into(), Value::from(resource_type));
        Value::Object(o)
    }
}

fn date(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

impl LeaseValues {
    fn to_json(&self) -> Value {
        let reservations: Vec<Value> = self
            .reservations
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(o) = r.as_object_mut() {
                    o.entry("allocations").or_insert_with(|| json!([]));
                }
                r
            })
            .collect();
        json!({
            "name": self.name,
            "project_id": self.project_id,
            "user_id": self.user_id,
            "start_date": date(self.start),
            "end_date": date(self.end),
            "reservations": reservations,
        })
    }

    fn context(&self) -> Value {
        json!({"user_id": self.user_id, "project_id": self.project_id})
    }
}

/// The lease policy in force.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub rules: LeasePolicy,
    external: Option<External>,
}

#[derive(Debug, Clone)]
struct External {
    check_create: Option<reqwest::Url>,
    check_update: Option<reqwest::Url>,
    on_end: Option<reqwest::Url>,
    token: Option<String>,
    client: reqwest::Client,
}

fn url(s: &str) -> Result<reqwest::Url, Error> {
    let u = reqwest::Url::parse(s).map_err(|e| config_error(format!("external policy url {s:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(config_error(format!("external policy url {s:?}: an http(s) URL with a host is needed")));
    }
    Ok(u)
}

impl Policy {
    pub fn from_config(c: &PolicyConfig) -> Result<Policy, Error> {
        let secs = |name: &str, v: Option<i64>| -> Result<Option<chrono::Duration>, Error> {
            match v {
                None | Some(-1) => Ok(None),
                Some(s) if s >= 0 => Ok(Some(chrono::Duration::seconds(s))),
                Some(s) => Err(config_error(format!("{name} = {s}: seconds, or -1 for none"))),
            }
        };
        let rules = LeasePolicy {
            max_duration: secs("max_lease_duration", c.max_lease_duration)?,
            extension_window: secs("extension_window", c.extension_window)?,
            extension_cutoff: secs("extension_cutoff", c.extension_cutoff)?,
            min_extension: secs("min_extension", c.min_extension)?,
            exempt_projects: c.exempt_projects.iter().cloned().collect::<BTreeSet<_>>(),
        };
        let external = match &c.external {
            None => None,
            Some(e) => {
                let base = e.url.as_deref().map(url).transpose()?;
                let endpoint = |name: &str, given: &Option<String>| -> Result<Option<reqwest::Url>, Error> {
                    match (given, &base) {
                        (Some(u), _) => url(u).map(Some),
                        (None, Some(b)) => {
                            b.join(name).map(Some).map_err(|err| config_error(format!("external policy url: {err}")))
                        }
                        (None, None) => Ok(None),
                    }
                };
                let check_create = endpoint("check-create", &e.check_create_url)?;
                let check_update = endpoint("check-update", &e.check_update_url)?;
                let on_end = endpoint("on-end", &e.on_end_url)?;
                if check_create.is_none() && check_update.is_none() && on_end.is_none() {
                    return Err(config_error("[policy.external] needs url or one of the *_url settings"));
                }
                if e.timeout_ms == 0 {
                    return Err(config_error("[policy.external] timeout_ms must be more than 0"));
                }
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_millis(e.timeout_ms))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|err| config_error(format!("external policy client: {err}")))?;
                Some(External { check_create, check_update, on_end, token: e.token.clone(), client })
            }
        };
        Ok(Policy { rules, external })
    }

    /// A new lease: the built-in rules, then the external service.
    pub async fn check_create(&self, lease: &LeaseValues) -> Result<(), Error> {
        if self.rules.is_exempt(&lease.project_id) {
            return Ok(());
        }
        self.rules.check_create(&lease.project_id, lease.start, lease.end)?;
        if let Some(x) = &self.external {
            if let Some(u) = &x.check_create {
                x.post(u, json!({"context": lease.context(), "lease": lease.to_json()})).await?;
            }
        }
        Ok(())
    }

    /// A lease changing from `current` to `new`.
    pub async fn check_update(
        &self,
        current: &LeaseValues,
        new: &LeaseValues,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        if self.rules.is_exempt(&current.project_id) {
            return Ok(());
        }
        self.rules.check_update(&current.project_id, (current.start, current.end), (new.start, new.end), now)?;
        if let Some(x) = &self.external {
            if let Some(u) = &x.check_update {
                let body =
                    json!({"context": current.context(), "current_lease": current.to_json(), "lease": new.to_json()});
                x.post(u, body).await?;
            }
        }
        Ok(())
    }

    /// A lease ended (or was deleted): the service is told; its answer
    /// cannot undo the end, so a refusal is only logged.
    pub async fn on_end(&self, lease: &LeaseValues) {
        if self.rules.is_exempt(&lease.project_id) {
            return;
        }
        if let Some(x) = &self.external {
            if let Some(u) = &x.on_end {
                if let Err(e) = x.post(u, json!({"context": lease.context(), "lease": lease.to_json()})).await {
                    tracing::warn!(lease = %lease.name, error = %e, "the lease policy service refused on-end");
                }
            }
        }
    }
}

impl External {
    async fn post(&self, url: &reqwest::Url, body: Value) -> Result<(), Error> {
        let mut req = self.client.post(url.clone()).json(&body);
        if let Some(t) = &self.token {
            req = req.header("X-Auth-Token", t);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%url, error = %e, "the lease policy service could not be reached");
                return Err(policy::denied(GENERIC_DENIAL));
            }
        };
        match resp.status().as_u16() {
            204 => Ok(()),
            403 => {
                let message = resp.json::<Value>().await.ok().and_then(|v| v["message"].as_str().map(str::to_owned));
                Err(policy::denied(message.unwrap_or_else(|| GENERIC_DENIAL.to_string())))
            }
            status => {
                // Not shown to the client: it may say more than it should.
                tracing::warn!(%url, status, "the lease policy service answered neither 204 nor 403");
                Err(policy::denied(GENERIC_DENIAL))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_is_checked() {
        assert!(Policy::from_config(&PolicyConfig::default()).is_ok());
        let bad = PolicyConfig { max_lease_duration: Some(-5), ..Default::default() };
        assert!(Policy::from_config(&bad).is_err());
        let ext = |url: Option<&str>| PolicyConfig {
            external: Some(ExternalPolicyConfig {
                url: url.map(str::to_owned),
                check_create_url: None,
                check_update_url: None,
                on_end_url: None,
                token: None,
                timeout_ms: 1000,
            }),
            ..Default::default()
        };
        assert!(Policy::from_config(&ext(None)).is_err());
        assert!(Policy::from_config(&ext(Some("ftp://x/"))).is_err());
        let p = Policy::from_config(&ext(Some("http://127.0.0.1:9/v1/"))).unwrap();
        let x = p.external.unwrap();
        assert_eq!(x.check_create.unwrap().as_str(), "http://127.0.0.1:9/v1/check-create");
        assert_eq!(x.on_end.unwrap().as_str(), "http://127.0.0.1:9/v1/on-end");
    }
}
