//! `virtual:instance`: `amount` slots of vcpus, memory and disk on enrolled
//! hosts for the lease's window, together (`affinity` true), apart (false)
//! or anywhere (null).

use std::collections::BTreeMap;

use async_trait::async_trait;
use berth_core::lease::codes;
use berth_core::Error;
use serde_json::Value;

use crate::host::{query_param, whole};
use crate::plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};

pub const RESOURCE_TYPE: &str = "virtual:instance";

pub struct InstancePlugin;

fn affinity(reservation: &Value) -> Result<Option<bool>, Error> {
    match reservation.get("affinity") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            "none" | "null" | "" => Ok(None),
            _ => Err(Error::invalid(codes::INVALID_LEASE, format!("affinity {s:?} is not true, false or null"))),
        },
        Some(v) => Err(Error::invalid(codes::INVALID_LEASE, format!("affinity {v} is not true, false or null"))),
    }
}

#[async_trait]
impl ResourcePlugin for InstancePlugin {
    fn resource_type(&self) -> &str {
        RESOURCE_TYPE
    }

    async fn validate(&self, reservation: &Value) -> Result<ResourceRequest, Error> {
        if !reservation.is_object() {
            return Err(Error::invalid(codes::INVALID_LEASE, "a reservation is a JSON object"));
        }
        let need = |key: &str, least: i64| -> Result<i64, Error> {
            match whole(reservation, key)? {
                Some(n) if n >= least && n <= i64::from(i32::MAX) => Ok(n),
                Some(n) => Err(Error::invalid(codes::INVALID_LEASE, format!("{key} {n} must be at least {least}"))),
                None => Err(Error::invalid(codes::INVALID_LEASE, format!("virtual:instance needs {key}"))),
            }
        };
        let amount = need("amount", 1)?;
        if amount > 10_000 {
            return Err(Error::invalid(codes::INVALID_LEASE, "amount must be at most 10000"));
        }
        let mut resources =
            BTreeMap::from([("VCPU".to_string(), need("vcpus", 1)?), ("MEMORY_MB".to_string(), need("memory_mb", 1)?)]);
        let disk = whole(reservation, "disk_gb")?.unwrap_or(0);
        if disk < 0 {
            return Err(Error::invalid(codes::INVALID_LEASE, "disk_gb must not be negative"));
        }
        if disk > 0 {
            resources.insert("DISK_GB".into(), disk);
        }
        Ok(ResourceRequest::Slots {
            amount: amount as u32,
            resources,
            affinity: affinity(reservation)?,
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
    async fn validates_instance_reservations() {
        let p = InstancePlugin;
        let r = p
            .validate(&json!({"amount": 2, "vcpus": "2", "memory_mb": 1024, "disk_gb": 0, "affinity": "False"}))
            .await
            .unwrap();
        let ResourceRequest::Slots { amount, resources, affinity, .. } = r else { panic!("slots") };
        assert_eq!((amount, affinity), (2, Some(false)));
        assert_eq!(resources, BTreeMap::from([("VCPU".into(), 2), ("MEMORY_MB".into(), 1024)]));
        for bad in [
            json!({"amount": 0, "vcpus": 1, "memory_mb": 1}),
            json!({"amount": 1, "memory_mb": 1}),
            json!({"amount": 1, "vcpus": 1, "memory_mb": 1, "affinity": "maybe"}),
            json!({"amount": 1, "vcpus": 1, "memory_mb": 1, "disk_gb": -1}),
        ] {
            assert!(p.validate(&bad).await.is_err(), "{bad}");
        }
    }
}
