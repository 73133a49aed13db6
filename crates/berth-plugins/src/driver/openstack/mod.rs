//! `openstack`: the built-in plugins' actions carried out on Nova, so that
//! Berth can stand in for Blazar in a cloud.
//!
//! - `physical:host`: the lease's pool is a Nova host aggregate named after
//!   the pool (the reservation's `resource_id`) whose metadata carries the
//!   reservation id (`reservation`) and its project (`filter_tenant_id`, for
//!   Nova's AggregateMultiTenancyIsolation), as Blazar's is. At start it is
//!   created and the hosts added (and taken out of the `free_pool`
//!   aggregate when one is configured); at the end the hosts are removed,
//!   the aggregate deleted (the hosts go back to `free_pool`), and under
//!   `release` the other consumers' servers deleted.
//! - `virtual:instance`: `wake_up` unshelves a shelved server or starts a
//!   stopped one; `shelve` shelves it; `delete` deletes it.
//!
//! Nova keeps no idempotency keys, so every step is made idempotent by
//! reading Nova's answer: a host already in the aggregate (409), a host or
//! aggregate already gone (404), a server already shelved or gone: each is
//! the step done, and the same call again answers the same. A 503 is
//! retried here with backoff (Nova behind a restarting API); anything else
//! is left to the manager's retries through [`HookError`].
//!
//! Authentication is a Keystone session (password or application
//! credential); the compute endpoint is taken from the token's catalog.

use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

mod config;
mod keystone;

pub use config::OpenStackConfig;
use keystone::Keystone;

use super::{config_error, failure_text, Driver};
use crate::plugin::HookError;

pub struct OpenStackDriver {
    config: OpenStackConfig,
    http: reqwest::Client,
    keystone: Keystone,
}

/// Why a request to Nova failed: Nova busy (503, retried here) or not.
enum Failed {
    Busy(String),
    Other(HookError),
}

/// One answer from Nova: status and JSON body (`null` when empty or not JSON).
struct Answer {
    status: StatusCode,
    body: Value,
    text: String,
}

impl OpenStackDriver {
    pub fn new(config: OpenStackConfig) -> Result<Self, berth_core::Error> {
        if config.auth_url.is_empty() {
            return Err(config_error("openstack needs auth_url, or berthd's [keystone] credentials to use"));
        }
        reqwest::Url::parse(&config.auth_url)
            .map_err(|e| config_error(format!("openstack auth_url {:?}: {e}", config.auth_url)))?;
        if config.timeout_ms == 0 {
            return Err(config_error("openstack timeout_ms must be more than 0"));
        }
        if !matches!(config.interface.as_str(), "public" | "internal" | "admin") {
            return Err(config_error(format!("openstack interface {:?}: public, internal or admin", config.interface)));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("berth/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| config_error(format!("openstack client: {e}")))?;
        let keystone = Keystone::new(&config, http.clone()).map_err(config_error)?;
        Ok(OpenStackDriver { config, http, keystone })
    }

    /// One request to Nova, retried with backoff while Nova answers 503;
    /// a 401 renews the token once.
    async fn nova(&self, method: Method, path: &str, body: Option<Value>) -> Result<Answer, HookError> {
        let once = || async {
            let mut renew = false;
            loop {
                let session = self.keystone.session(renew).await.map_err(Failed::Other)?;
                let url = format!("{}{path}", session.compute);
                let mut req = self
                    .http
                    .request(method.clone(), &url)
                    .header("X-Auth-Token", &session.token)
                    .header("OpenStack-API-Version", format!("compute {}", self.config.compute_microversion))
                    .header("X-OpenStack-Nova-API-Version", &self.config.compute_microversion);
                if let Some(b) = &body {
                    req = req.json(b);
                }
                let resp = req
                    .send()
                    .await
                    .map_err(|e| Failed::Other(HookError::retryable(format!("Nova {method} {path}: {e}"))))?;
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                if status == StatusCode::UNAUTHORIZED && !renew {
                    renew = true;
                    continue;
                }
                let body = serde_json::from_str(&text).unwrap_or(Value::Null);
                if status == StatusCode::SERVICE_UNAVAILABLE {
                    return Err(Failed::Busy(format!("Nova {method} {path}: 503 {}", nova_message(&body, &text))));
                }
                return Ok(Answer { status, body, text });
            }
        };
        once.retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(self.config.retry_min_ms))
                .with_max_times(self.config.retries)
                .with_jitter(),
        )
        .when(|e: &Failed| matches!(e, Failed::Busy(_)))
        .await
        .map_err(|e| match e {
            Failed::Busy(m) => HookError::retryable(m),
            Failed::Other(e) => e,
        })
    }

    /// An answer Nova gave that is none of those a step expects.
    fn unexpected(&self, what: &str, a: &Answer) -> HookError {
        let message = format!("Nova {what}: {} {}", a.status, nova_message(&a.body, &a.text));
        if a.status.is_server_error() || a.status == StatusCode::TOO_MANY_REQUESTS {
            HookError::retryable(message)
        } else {
            HookError::permanent(message)
        }
    }

    /// The aggregate named `name`, if there is one: `(id, metadata)`.
    async fn find_aggregate(&self, name: &str) -> Result<Option<(i64, Value)>, HookError> {
        let a = self.nova(Method::GET, "/os-aggregates", None).await?;
        if a.status != StatusCode::OK {
            return Err(self.unexpected("listing aggregates", &a));
        }
        let found = a.body["aggregates"].as_array().into_iter().flatten().find(|g| g["name"] == name);
        Ok(found.and_then(|g| Some((g["id"].as_i64()?, g["metadata"].clone()))))
    }

    /// The aggregate named `name` with `metadata`: created when missing,
    /// its metadata set when it lacks them (a call cut off between the two).
    async fn ensure_aggregate(&self, name: &str, metadata: &Value) -> Result<i64, HookError> {
        let has_metadata = |found: &Value| {
            metadata.as_object().into_iter().flatten().all(|(k, v)| v.is_null() || found.get(k) == Some(v))
        };
        let id = match self.find_aggregate(name).await? {
            Some((id, found)) if has_metadata(&found) => return Ok(id),
            Some((id, _)) => id,
            None => self.create_aggregate(name).await?,
        };
        let a = self
            .nova(
                Method::POST,
                &format!("/os-aggregates/{id}/action"),
                Some(json!({"set_metadata": {"metadata": metadata}})),
            )
            .await?;
        if a.status != StatusCode::OK {
            return Err(self.unexpected(&format!("setting aggregate {name}'s metadata"), &a));
        }
        Ok(id)
    }

    async fn create_aggregate(&self, name: &str) -> Result<i64, HookError> {
        let a = self.nova(Method::POST, "/os-aggregates", Some(json!({"aggregate": {"name": name}}))).await?;
        Ok(match a.status {
            StatusCode::OK => a.body["aggregate"]["id"]
                .as_i64()
                .ok_or_else(|| HookError::retryable(format!("Nova created aggregate {name} but gave no id")))?,
            // Made meanwhile (a second berthd on the same event): it is there.
            StatusCode::CONFLICT => match self.find_aggregate(name).await? {
                Some((id, _)) => id,
                None => return Err(self.unexpected(&format!("creating aggregate {name}"), &a)),
            },
            _ => return Err(self.unexpected(&format!("creating aggregate {name}"), &a)),
        })
    }

    /// `add_host`; a host already there (409) is the step done.
    async fn add_host(&self, aggregate: i64, host: &str) -> Result<(), HookError> {
        let a = self
            .nova(
                Method::POST,
                &format!("/os-aggregates/{aggregate}/action"),
                Some(json!({"add_host": {"host": host}})),
            )
            .await?;
        match a.status {
            StatusCode::OK | StatusCode::CONFLICT => Ok(()),
            _ => Err(self.unexpected(&format!("adding host {host} to aggregate {aggregate}"), &a)),
        }
    }

    /// `remove_host`; a host (or aggregate) not there (404) is the step done.
    async fn remove_host(&self, aggregate: i64, host: &str) -> Result<(), HookError> {
        let a = self
            .nova(
                Method::POST,
                &format!("/os-aggregates/{aggregate}/action"),
                Some(json!({"remove_host": {"host": host}})),
            )
            .await?;
        match a.status {
            StatusCode::OK | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(self.unexpected(&format!("removing host {host} from aggregate {aggregate}"), &a)),
        }
    }

    async fn free_pool(&self) -> Result<Option<i64>, HookError> {
        let Some(name) = &self.config.free_pool else { return Ok(None) };
        match self.find_aggregate(name).await? {
            Some((id, _)) => Ok(Some(id)),
            None => Err(HookError::permanent(format!("Nova has no free pool aggregate {name:?} (free_pool)"))),
        }
    }

    /// At a lease's start: the lease's aggregate, with the hosts in it.
    async fn hosts_join(&self, payload: &Value) -> Result<Value, HookError> {
        let name = pool_name(payload)?;
        let hosts = host_names(payload);
        let metadata = json!({
            "reservation": payload["reservation"]["id"],
            "filter_tenant_id": payload["lease"]["project_id"],
        });
        let id = self.ensure_aggregate(&name, &metadata).await?;
        let free = self.free_pool().await?;
        for h in &hosts {
            if let Some(free) = free {
                self.remove_host(free, h).await?;
            }
            self.add_host(id, h).await?;
        }
        Ok(json!({"aggregate": name, "hosts": hosts}))
    }

    /// At a lease's end: the hosts leave the lease's aggregate, which goes.
    async fn hosts_leave(&self, action: &str, payload: &Value) -> Result<Value, HookError> {
        let name = pool_name(payload)?;
        let hosts = host_names(payload);
        let mut deleted = Vec::new();
        if action == "release" {
            for id in other_consumers(payload) {
                self.delete_server(&id).await?;
                deleted.push(id);
            }
        }
        let free = self.free_pool().await?;
        if let Some((id, _)) = self.find_aggregate(&name).await? {
            for h in &hosts {
                self.remove_host(id, h).await?;
            }
            let a = self.nova(Method::DELETE, &format!("/os-aggregates/{id}"), None).await?;
            if !matches!(a.status, StatusCode::OK | StatusCode::NO_CONTENT | StatusCode::NOT_FOUND) {
                return Err(self.unexpected(&format!("deleting aggregate {name}"), &a));
            }
        }
        // Back to the free pool: every host at a release, the hosts nobody
        // else is on at a recycle; shared and still-busy hosts wait outside it.
        if let Some(free) = free {
            for h in payload["hosts"].as_array().into_iter().flatten() {
                let idle = h["other_consumers"].as_array().is_none_or(Vec::is_empty);
                let back = action == "release" || (action == "recycle" && idle);
                if let (true, Some(name)) = (back, h["resource_provider"]["name"].as_str()) {
                    self.add_host(free, name).await?;
                }
            }
        }
        Ok(json!({"aggregate": name, "hosts": hosts, "deleted_servers": deleted}))
    }

    /// A heal: the hosts replacing failed ones join the lease's aggregate
    /// (as at a start), the failed ones (`leave`) leave it for the free pool.
    async fn hosts_heal(&self, payload: &Value) -> Result<Value, HookError> {
        let joined = self.hosts_join(payload).await?;
        let name = pool_name(payload)?;
        let left = host_names(&json!({"hosts": payload["leave"]}));
        let free = self.free_pool().await?;
        if let Some((id, _)) = self.find_aggregate(&name).await? {
            for h in &left {
                self.remove_host(id, h).await?;
                if let Some(free) = free {
                    self.add_host(free, h).await?;
                }
            }
        }
        Ok(json!({"aggregate": name, "joined": joined["hosts"], "left": left}))
    }

    /// `DELETE /servers/{id}`; a server already gone (404) is the step done.
    async fn delete_server(&self, id: &str) -> Result<(), HookError> {
        let a = self.nova(Method::DELETE, &format!("/servers/{id}"), None).await?;
        match a.status {
            StatusCode::NO_CONTENT | StatusCode::ACCEPTED | StatusCode::OK | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(self.unexpected(&format!("deleting server {id}"), &a)),
        }
    }

    /// The server's status, or `None` when Nova does not know it.
    async fn server_status(&self, id: &str) -> Result<Option<String>, HookError> {
        let a = self.nova(Method::GET, &format!("/servers/{id}"), None).await?;
        match a.status {
            StatusCode::OK => Ok(a.body["server"]["status"].as_str().map(String::from)),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(self.unexpected(&format!("reading server {id}"), &a)),
        }
    }

    /// A server action, `{"<action>": null}`; Nova answers 202.
    async fn server_action(&self, id: &str, action: &str) -> Result<Answer, HookError> {
        let a = self.nova(Method::POST, &format!("/servers/{id}/action"), Some(json!({ action: null }))).await?;
        match a.status {
            StatusCode::ACCEPTED | StatusCode::OK | StatusCode::CONFLICT => Ok(a),
            _ => Err(self.unexpected(&format!("{action} of server {id}"), &a)),
        }
    }

    /// Brings a server to `want` by `action`. A 409 (Nova's "not in a
    /// state for that") is success when the server is there already (a
    /// repeat, a retry), else worth a retry (a task under way). The answer
    /// is the state reached, the same however often it is asked for.
    async fn drive_server(&self, id: &str, action: &str, want: &[&str]) -> Result<Value, HookError> {
        let a = self.server_action(id, action).await?;
        if a.status == StatusCode::CONFLICT {
            match self.server_status(id).await? {
                Some(now) if want.contains(&now.as_str()) => {}
                Some(now) => {
                    return Err(HookError::retryable(format!(
                        "Nova refused {action} of server {id} ({}): it is {now}",
                        nova_message(&a.body, &a.text)
                    )))
                }
                None => return Err(HookError::permanent(format!("Nova has no server {id}"))),
            }
        }
        tracing::info!(driver = "openstack", server = id, action, status = a.status.as_u16(), "server action");
        Ok(json!({"server": id, "state": want[0]}))
    }

    async fn instance(&self, action: &str, payload: &Value) -> Result<Value, HookError> {
        let Some(id) = payload["instance_id"].as_str() else {
            // A slot no instance was named for: nothing on Nova to act on.
            return Ok(json!({"server": null}));
        };
        match action {
            // Which action wakes it depends on how it sleeps.
            "wake_up" => match self.server_status(id).await?.as_deref() {
                Some("SHELVED" | "SHELVED_OFFLOADED") => self.drive_server(id, "unshelve", &["ACTIVE"]).await,
                Some(_) => self.drive_server(id, "os-start", &["ACTIVE"]).await,
                None => Err(HookError::permanent(format!("Nova has no server {id}"))),
            },
            "shelve" => self.drive_server(id, "shelve", &["SHELVED_OFFLOADED", "SHELVED"]).await,
            "delete" => {
                self.delete_server(id).await?;
                Ok(json!({"server": id, "state": "DELETED"}))
            }
            _ => Err(HookError::permanent(format!("the openstack driver has no instance action {action}"))),
        }
    }
}

fn nova_message(body: &Value, text: &str) -> String {
    // Nova's faults are `{"<kind>": {"code": …, "message": "…"}}`.
    body.as_object()
        .and_then(|o| o.values().find_map(|v| v["message"].as_str()))
        .map(String::from)
        .unwrap_or_else(|| failure_text(text.as_bytes()))
}

/// The lease's aggregate is named after its pool (the reservation's `resource_id`).
fn pool_name(payload: &Value) -> Result<String, HookError> {
    payload["pool"]
        .as_str()
        .or_else(|| payload["reservation"]["resource_id"].as_str())
        .map(String::from)
        .ok_or_else(|| HookError::permanent("the hook names no pool for the lease's aggregate"))
}

/// Nova's host names: the resource providers' names (a compute node's
/// provider is named after its host).
fn host_names(payload: &Value) -> Vec<String> {
    payload["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["resource_provider"]["name"].as_str().map(String::from))
        .collect()
}

fn other_consumers(payload: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in payload["hosts"].as_array().into_iter().flatten() {
        for c in h["other_consumers"].as_array().into_iter().flatten() {
            if let Some(id) = c["consumer_id"].as_str() {
                if !out.iter().any(|o| o == id) {
                    out.push(id.to_string());
                }
            }
        }
    }
    out
}

#[async_trait]
impl Driver for OpenStackDriver {
    fn kind(&self) -> &'static str {
        "openstack"
    }

    async fn call(&self, action: &str, payload: &Value, idempotency_key: &str) -> Result<Value, HookError> {
        tracing::debug!(driver = "openstack", action, idempotency_key, "calling Nova");
        // The host plugin's actions and the instance plugin's do not overlap.
        match action {
            "on_start" => self.hosts_join(payload).await,
            "heal" => self.hosts_heal(payload).await,
            "release" | "recycle" | "share" => self.hosts_leave(action, payload).await,
            // Nothing on Nova to do before the end; Blazar only notifies.
            "notify" => Ok(json!({"notified": true})),
            "snapshot" => Err(HookError::permanent("the openstack driver does not snapshot (before_end = \"notify\")")),
            "wake_up" | "shelve" | "delete" => self.instance(action, payload).await,
            _ => Err(HookError::permanent(format!("the openstack driver has no action {action}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_payload() {
        let p = json!({"pool": "p-1", "hosts": [
            {"resource_provider": {"name": "c1"}, "other_consumers": [{"consumer_id": "s1"}]},
            {"resource_provider": {"name": "c2"}, "other_consumers": [{"consumer_id": "s1"}, {"consumer_id": "s2"}]},
        ]});
        assert_eq!(pool_name(&p).unwrap(), "p-1");
        assert_eq!(host_names(&p), ["c1", "c2"]);
        assert_eq!(other_consumers(&p), ["s1", "s2"]);
        assert_eq!(nova_message(&json!({"conflictingRequest": {"code": 409, "message": "in use"}}), ""), "in use");
    }
}
