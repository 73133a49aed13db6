//! `physical:host`: whole hosts for the lease's window.
//!
//! Parameters: `min`, `max`, `hypervisor_properties` (on vcpus, memory_mb,
//! local_gb, hypervisor_hostname), `resource_properties` (on extra
//! capabilities), `before_end` (what to do before the end; recorded).

use async_trait::async_trait;
use berth_core::lease::{codes, Demand};
use berth_core::{query, Error};
use serde_json::Value;

use crate::plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};

pub const RESOURCE_TYPE: &str = "physical:host";

pub struct HostPlugin;

/// A whole number from a JSON number or a string holding one (Blazar's
/// client sends either).
pub(crate) fn whole(reservation: &Value, key: &str) -> Result<Option<i64>, Error> {
    let bad = || Error::invalid(codes::INVALID_LEASE, format!("reservation {key} must be a whole number"));
    match reservation.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// A query parameter, checked, as the JSON list it stands for.
pub(crate) fn query_param(reservation: &Value, key: &str) -> Result<Option<Value>, Error> {
    let v = reservation.get(key).cloned().unwrap_or(Value::Null);
    let parsed = query::parse(key, &v).map_err(|e| Error::invalid(codes::INVALID_LEASE, e.detail))?;
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
        ResourceRequest::Slots { amount, resources, affinity, resource_properties } => Demand::Slots {
            amount: *amount,
            resources: resources.clone(),
            affinity: *affinity,
            resource_properties: parsed("resource_properties", resource_properties)?,
        },
        ResourceRequest::Nothing => Demand::Nothing,
    })
}

#[async_trait]
impl ResourcePlugin for HostPlugin {
    fn resource_type(&self) -> &str {
        RESOURCE_TYPE
    }

    async fn validate(&self, reservation: &Value) -> Result<ResourceRequest, Error> {
        if !reservation.is_object() {
            return Err(Error::invalid(codes::INVALID_LEASE, "a reservation is a JSON object"));
        }
        let min = whole(reservation, "min")?.unwrap_or(1);
        let max = whole(reservation, "max")?.unwrap_or(min);
        if min < 1 || max < min || max > 10_000 {
            return Err(Error::invalid(
                codes::INVALID_LEASE,
                format!("physical:host needs 1 <= min <= max <= 10000, got min {min}, max {max}"),
            ));
        }
        if let Some(b) = reservation.get("before_end") {
            if !(b.is_string() || b.is_null()) {
                return Err(Error::invalid(codes::INVALID_LEASE, "before_end must be a string"));
            }
        }
        Ok(ResourceRequest::Hosts {
            min: min as u32,
            max: max as u32,
            hypervisor_properties: query_param(reservation, "hypervisor_properties")?,
            resource_properties: query_param(reservation, "resource_properties")?,
        })
    }

    async fn on_start(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }

    async fn before_end(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }

    async fn on_end(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn validates_blazar_host_reservations() {
        let p = HostPlugin;
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
