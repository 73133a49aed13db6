//! `physical:host`: whole hosts for the lease's window.
//!
//! Parameters: `min`, `max`, `hypervisor_properties` (on vcpus, memory_mb,
//! local_gb, hypervisor_hostname), `resource_properties` (on extra
//! capabilities), `before_end` (`notify` or `snapshot`) and `end_policy`
//! (`release`, `recycle` or `shared`), both defaulting to `[plugins.host]`.
//!
//! Hooks: at start the hosts leave the free pool for the lease's pool (the
//! reservation's `resource_id`, a Placement aggregate); before the end the
//! driver is told (`notify`) or asked to `snapshot` the instances on them;
//! at the end they go back by the end policy; at a heal (`on_heal`) the
//! hosts that replace failed ones join the pool and the failed ones leave
//! it; when a started lease's sharing changes (`on_update`), the pool's
//! tenants are sent again. The pool's `metadata` (at start and update)
//! names the projects that may use it as Nova's aggregate multi-tenancy
//! isolation reads them: [`tenant_metadata`]. The driver acts outside; the
//! pool moves, deleted consumers and held-back hosts are effects the manager
//! records.

use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use berth_core::error::ErrorCode;
use berth_core::lease::{Demand, FREE_POOL};
use berth_core::lease_event::{Effect, RECYCLE_POOL, SHARED_POOL};
use berth_core::{query, Error};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::driver::Driver;
use crate::params::{param, Param, ParamType};
use crate::plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};

pub const RESOURCE_TYPE: &str = "physical:host";

/// The parameters a reservation of this type takes.
const HOST_PARAMETERS: &[Param] = &[
    param("min", ParamType::Integer),
    param("max", ParamType::Integer),
    param("hypervisor_properties", ParamType::Query),
    param("resource_properties", ParamType::Query),
    param("before_end", ParamType::String),
    param("end_policy", ParamType::String),
    // false: keep its hosts when one becomes unusable (only marked).
    param("heal", ParamType::Boolean),
    // true: what its slots hold and do not use may be lent to preemptible consumers.
    param("lend_idle", ParamType::Boolean),
];

/// How hosts go back at a lease's end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndPolicy {
    /// Delete the other consumers on the hosts (through the driver) and put
    /// the hosts back in the free pool.
    #[default]
    Release,
    /// Keep the other consumers; a host is not reservable until they are
    /// gone or `recycle_grace_s` has passed, then it is released.
    Recycle,
    /// Move the hosts to the shared pool, not reservable until an admin
    /// returns them (makes them reservable again).
    Shared,
}

/// What happens at a lease's before-end event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BeforeEnd {
    /// Tell the driver the lease is about to end.
    #[default]
    Notify,
    /// Ask the driver to snapshot the instances on the hosts.
    Snapshot,
}

/// `[plugins.host]`; a reservation may name its own `end_policy` and
/// `before_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostOptions {
    pub end_policy: EndPolicy,
    pub before_end: BeforeEnd,
    pub recycle_grace_s: u64,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions { end_policy: EndPolicy::Release, before_end: BeforeEnd::Notify, recycle_grace_s: 3600 }
    }
}

pub struct HostPlugin {
    driver: Arc<dyn Driver>,
    options: HostOptions,
}

impl HostPlugin {
    pub fn new(driver: Arc<dyn Driver>, options: HostOptions) -> Self {
        HostPlugin { driver, options }
    }
}

/// A reservation setting given as a string, or the configured default.
fn setting<T: serde::de::DeserializeOwned>(reservation: &Value, key: &str) -> Result<Option<T>, Error> {
    match reservation.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() || s == "default" => Ok(None),
        Some(v @ Value::String(_)) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|_| Error::invalid(ErrorCode::InvalidLease, format!("{key} {v} is not one Berth knows"))),
        Some(v) => Err(Error::invalid(ErrorCode::InvalidLease, format!("{key} must be a string, not {v}"))),
    }
}

/// A host a reservation holds, as the hook's allocations carry it.
struct HeldHost {
    uuid: Uuid,
    provider: Value,
    /// Consumers other than reservations on it (instances someone started).
    others: Vec<Value>,
}

fn held_hosts(hook: &Hook) -> Vec<HeldHost> {
    let mut out: Vec<HeldHost> = Vec::new();
    for a in &hook.allocations {
        let provider = a.get("resource_provider").cloned().unwrap_or(Value::Null);
        let Some(uuid) = provider.get("uuid").and_then(Value::as_str).and_then(|u| Uuid::parse_str(u).ok()) else {
            continue;
        };
        if out.iter().any(|h| h.uuid == uuid) {
            continue;
        }
        let others = a.get("other_consumers").and_then(Value::as_array).cloned().unwrap_or_default();
        out.push(HeldHost { uuid, provider, others });
    }
    out
}

fn consumer_ids(others: &[Value]) -> Vec<Uuid> {
    others
        .iter()
        .filter_map(|o| o.get("consumer_id").and_then(Value::as_str).and_then(|c| Uuid::parse_str(c).ok()))
        .collect()
}

/// The pool's metadata naming the projects that may use its hosts, as
/// Nova's `AggregateMultiTenancyIsolation` reads them: the lease's owner
/// as `filter_tenant_id`, then each project it is shared with as
/// `filter_tenant_id2`, `filter_tenant_id3`, ... (one id per key: an
/// aggregate's metadata value holds at most 255 characters).
pub fn tenant_metadata(lease: &Value) -> Value {
    let owner = lease.get("project_id").and_then(Value::as_str).into_iter();
    let shared = lease.get("shared_with").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    let mut metadata = serde_json::Map::new();
    for (i, project) in owner.chain(shared).enumerate() {
        let key = if i == 0 { "filter_tenant_id".to_string() } else { format!("filter_tenant_id{}", i + 1) };
        metadata.insert(key, json!(project));
    }
    Value::Object(metadata)
}

/// The reservation's pool: its `resource_id`.
fn pool_of(hook: &Hook) -> Result<Uuid, HookError> {
    hook.reservation
        .get("resource_id")
        .and_then(Value::as_str)
        .and_then(|u| Uuid::parse_str(u).ok())
        .ok_or_else(|| HookError::permanent("the reservation has no pool (resource_id)"))
}

impl HostPlugin {
    async fn call(&self, action: &str, hook: &Hook, hosts: &[HeldHost], extra: Value) -> Result<Value, HookError> {
        let mut payload = json!({
            "resource_type": RESOURCE_TYPE,
            "event_type": hook.event_type,
            "lease": hook.lease,
            "reservation": hook.reservation,
            "hosts": hosts.iter().map(|h| json!({"resource_provider": h.provider, "other_consumers": h.others}))
                .collect::<Vec<_>>(),
        });
        if let (Some(p), Value::Object(e)) = (payload.as_object_mut(), extra) {
            p.extend(e);
        }
        self.driver.call(action, &payload, &hook.idempotency_key).await
    }

    fn end_policy(&self, hook: &Hook) -> EndPolicy {
        setting(&hook.reservation, "end_policy").ok().flatten().unwrap_or(self.options.end_policy)
    }
}

/// A reservation's whole number `key`, as a number or a string of one.
pub(crate) fn whole(reservation: &Value, key: &str) -> Result<Option<i64>, Error> {
    match reservation.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(given) => number(given).map(Some).ok_or_else(|| {
            Error::invalid(ErrorCode::InvalidLease, format!("reservation {key} must be a whole number, not {given}"))
        }),
    }
}

/// A whole number as Blazar's clients send one: a number, or a string of
/// one.
fn number(given: &Value) -> Option<i64> {
    match given {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A reservation's whole number `key` within `range`, as a number or a
/// string of one; a refusal names the range and what was given, whichever
/// bound it misses and however large it is.
pub(crate) fn whole_in(reservation: &Value, key: &str, range: RangeInclusive<i64>) -> Result<Option<i64>, Error> {
    let given = match reservation.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    match number(given) {
        Some(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(Error::invalid(
            ErrorCode::InvalidLease,
            format!("{key} must be a whole number from {} to {}, not {given}", range.start(), range.end()),
        )),
    }
}

/// A query parameter, checked, as the JSON list it stands for.
pub(crate) fn query_param(reservation: &Value, key: &str) -> Result<Option<Value>, Error> {
    let v = reservation.get(key).cloned().unwrap_or(Value::Null);
    let parsed = query::parse(key, &v).map_err(|e| Error::invalid(ErrorCode::InvalidLease, e.detail))?;
    Ok(match (parsed, v) {
        (None, _) => None,
        (Some(_), Value::String(s)) => serde_json::from_str(&s).ok(),
        (Some(_), v) => Some(v),
    })
}

fn parsed(field: &str, v: &Option<Value>) -> Result<Option<query::Query>, Error> {
    match v {
        Some(v) => query::parse(field, v),
        None => Ok(None),
    }
}

/// What the scheduler needs from a plugin's request.
pub fn demand(request: &ResourceRequest) -> Result<Demand, Error> {
    Ok(match request {
        ResourceRequest::Hosts { min, max, hypervisor_properties, resource_properties } => Demand::Hosts {
            min: *min,
            max: *max,
            hypervisor_properties: parsed("hypervisor_properties", hypervisor_properties)?,
            resource_properties: parsed("resource_properties", resource_properties)?,
        },
        ResourceRequest::Slots { amount, resources, affinity, resource_properties, traits } => Demand::Slots {
            amount: *amount,
            resources: resources.clone(),
            affinity: *affinity,
            resource_properties: parsed("resource_properties", resource_properties)?,
            traits: traits.clone(),
        },
        ResourceRequest::Nothing => Demand::Nothing,
    })
}

#[async_trait]
impl ResourcePlugin for HostPlugin {
    fn resource_type(&self) -> &str {
        RESOURCE_TYPE
    }

    fn driver_kind(&self) -> Option<&'static str> {
        Some(self.driver.kind())
    }

    fn parameters(&self) -> Option<&'static [Param]> {
        Some(HOST_PARAMETERS)
    }

    async fn validate(&self, reservation: &Value) -> Result<ResourceRequest, Error> {
        if !reservation.is_object() {
            return Err(Error::invalid(ErrorCode::InvalidLease, "a reservation is a JSON object"));
        }
        let min = whole(reservation, "min")?.unwrap_or(1);
        let max = whole(reservation, "max")?.unwrap_or(min);
        if min < 1 || max < min || max > 10_000 {
            return Err(Error::invalid(
                ErrorCode::InvalidLease,
                format!("physical:host needs 1 <= min <= max <= 10000, got min {min}, max {max}"),
            ));
        }
        setting::<BeforeEnd>(reservation, "before_end")?;
        setting::<EndPolicy>(reservation, "end_policy")?;
        Ok(ResourceRequest::Hosts {
            min: min as u32,
            max: max as u32,
            hypervisor_properties: query_param(reservation, "hypervisor_properties")?,
            resource_properties: query_param(reservation, "resource_properties")?,
        })
    }

    /// The hosts leave the free pool for the lease's pool.
    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let hosts = held_hosts(hook);
        let pool = pool_of(hook)?;
        let extra = json!({"pool": pool, "metadata": tenant_metadata(&hook.lease)});
        let detail = self.call("on_start", hook, &hosts, extra).await?;
        let effects = vec![Effect::MoveHosts {
            hosts: hosts.iter().map(|h| h.uuid).collect(),
            leave: vec![FREE_POOL],
            join: Some(pool),
        }];
        Ok(HookOutcome { detail, effects })
    }

    async fn before_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let hosts = held_hosts(hook);
        let action = match setting(&hook.reservation, "before_end").ok().flatten().unwrap_or(self.options.before_end) {
            BeforeEnd::Notify => "notify",
            BeforeEnd::Snapshot => "snapshot",
        };
        let detail = self.call(action, hook, &hosts, json!({})).await?;
        Ok(HookOutcome { detail, effects: Vec::new() })
    }

    /// The hosts go back by the end policy.
    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let hosts = held_hosts(hook);
        let pool = pool_of(hook)?;
        let all: Vec<Uuid> = hosts.iter().map(|h| h.uuid).collect();
        let policy = self.end_policy(hook);
        let (action, effects) = match policy {
            EndPolicy::Release => {
                let others: Vec<Uuid> = hosts.iter().flat_map(|h| consumer_ids(&h.others)).collect();
                let mut effects = Vec::new();
                if !others.is_empty() {
                    effects.push(Effect::DeleteConsumers { consumers: others });
                }
                effects.push(Effect::MoveHosts { hosts: all, leave: vec![pool], join: Some(FREE_POOL) });
                ("release", effects)
            }
            EndPolicy::Recycle => {
                let (busy, free): (Vec<&HeldHost>, Vec<&HeldHost>) = hosts.iter().partition(|h| !h.others.is_empty());
                let busy: Vec<Uuid> = busy.iter().map(|h| h.uuid).collect();
                let mut effects = vec![Effect::MoveHosts {
                    hosts: free.iter().map(|h| h.uuid).collect(),
                    leave: vec![pool],
                    join: Some(FREE_POOL),
                }];
                if !busy.is_empty() {
                    effects.push(Effect::MoveHosts {
                        hosts: busy.clone(),
                        leave: vec![pool, FREE_POOL],
                        join: Some(RECYCLE_POOL),
                    });
                    effects.push(Effect::SetReservable { hosts: busy.clone(), reservable: false });
                    effects.push(Effect::HoldHosts {
                        hosts: busy,
                        pool: RECYCLE_POOL,
                        until: None,
                        for_s: Some(self.options.recycle_grace_s),
                    });
                }
                ("recycle", effects)
            }
            EndPolicy::Shared => (
                "share",
                vec![
                    Effect::MoveHosts { hosts: all.clone(), leave: vec![pool, FREE_POOL], join: Some(SHARED_POOL) },
                    Effect::SetReservable { hosts: all.clone(), reservable: false },
                    Effect::HoldHosts { hosts: all, pool: SHARED_POOL, until: None, for_s: None },
                ],
            ),
        };
        let detail = self.call(action, hook, &hosts, json!({"pool": pool})).await?;
        Ok(HookOutcome { detail, effects })
    }

    /// A heal: the new hosts leave the free pool for the lease's pool, the
    /// failed ones they replace leave it for the free pool.
    async fn on_heal(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let hosts = held_hosts(hook);
        let pool = pool_of(hook)?;
        let replaced: Vec<Value> = hook.allocations.iter().filter_map(|a| a.get("replaces").cloned()).collect();
        let left: Vec<Uuid> = replaced
            .iter()
            .filter_map(|r| r.get("uuid").and_then(Value::as_str).and_then(|u| Uuid::parse_str(u).ok()))
            .collect();
        let leave: Vec<Value> = replaced.iter().map(|r| json!({"resource_provider": r})).collect();
        let detail = self.call("heal", hook, &hosts, json!({"pool": pool, "leave": leave})).await?;
        let effects = vec![
            Effect::MoveHosts { hosts: left, leave: vec![pool], join: Some(FREE_POOL) },
            Effect::MoveHosts {
                hosts: hosts.iter().map(|h| h.uuid).collect(),
                leave: vec![FREE_POOL],
                join: Some(pool),
            },
        ];
        Ok(HookOutcome { detail, effects })
    }

    /// The lease's sharing changed while it runs: the pool's tenants again,
    /// the whole list (`update`).
    async fn on_update(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let hosts = held_hosts(hook);
        let extra = json!({"pool": pool_of(hook)?, "metadata": tenant_metadata(&hook.lease)});
        let detail = self.call("update", hook, &hosts, extra).await?;
        Ok(HookOutcome { detail, effects: Vec::new() })
    }

    /// Recycled hosts due back: whoever is still on them goes.
    async fn on_return(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        let hosts = held_hosts(hook);
        let others: Vec<Uuid> = hosts.iter().flat_map(|h| consumer_ids(&h.others)).collect();
        if others.is_empty() {
            return Ok(HookOutcome { detail: json!({"released": []}), effects: Vec::new() });
        }
        let detail = self.call("release", hook, &hosts, json!({})).await?;
        Ok(HookOutcome { detail, effects: vec![Effect::DeleteConsumers { consumers: others }] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn validates_blazar_host_reservations() {
        let p = HostPlugin::new(Arc::new(crate::driver::NoopDriver::new()), HostOptions::default());
        let r = p
            .validate(&json!({"min": "1", "max": 3, "hypervisor_properties": "[\">=\", \"$vcpus\", \"4\"]",
                              "resource_properties": ""}))
            .await
            .unwrap();
        assert_eq!(
            r,
            ResourceRequest::Hosts {
                min: 1,
                max: 3,
                hypervisor_properties: Some(json!([">=", "$vcpus", "4"])),
                resource_properties: None
            }
        );
        assert!(matches!(demand(&r).unwrap(), Demand::Hosts { min: 1, max: 3, hypervisor_properties: Some(_), .. }));
        let lease = json!({"project_id": "a", "shared_with": ["b", "c"]});
        let want = json!({"filter_tenant_id": "a", "filter_tenant_id2": "b", "filter_tenant_id3": "c"});
        assert_eq!(tenant_metadata(&lease), want);
        for bad in [
            json!({"min": 2, "max": 1}),
            json!({"min": 0}),
            json!({"min": "x"}),
            json!({"min": 1.5}),
            json!({"hypervisor_properties": "[\"~\"]"}),
            json!([]),
        ] {
            assert!(p.validate(&bad).await.is_err(), "{bad}");
        }
    }
}
