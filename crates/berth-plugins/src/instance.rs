//! `virtual:instance`: `amount` slots of vcpus, memory and disk on enrolled
//! hosts for the lease's window, together (`affinity` true), apart (false)
//! or anywhere (null).
//!
//! Each slot is a consumer. At start every slot's instance is woken up
//! through the driver (`wake_up`, with the instance id the lease named for
//! that slot in `instance_ids`, as when the compute service created the
//! instance RESERVED and the lease references it); at end they are deleted
//! or shelved, by `[plugins.instance] on_end`. One driver call per slot,
//! keyed by the hook's key and the slot's consumer, so each slot's effect is
//! applied once however often the event is attempted.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use berth_core::error::ErrorCode;
use berth_core::inventory::MAX_AMOUNT;
use berth_core::Error;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::driver::Driver;
use crate::host::{query_param, whole_in};
use crate::params::{param, Param, ParamType};
use crate::plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};

pub const RESOURCE_TYPE: &str = "virtual:instance";

/// The parameters a reservation of this type takes.
const INSTANCE_PARAMETERS: &[Param] = &[
    param("amount", ParamType::Integer),
    param("vcpus", ParamType::Integer),
    param("memory_mb", ParamType::Integer),
    param("disk_gb", ParamType::Integer),
    param("affinity", ParamType::OptionalBoolean),
    param("resource_properties", ParamType::Query),
    param("instance_ids", ParamType::StringList),
    param("instance_id", ParamType::String),
    // false: keep its slots when a host becomes unusable (only marked).
    param("heal", ParamType::Boolean),
    // true: what its slots hold and do not use may be lent to preemptible consumers.
    param("lend_idle", ParamType::Boolean),
];

/// What happens to the instances at a lease's end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceEnd {
    #[default]
    Delete,
    Shelve,
}

/// `[plugins.instance]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InstanceOptions {
    pub on_end: InstanceEnd,
    /// What happens to a preemptible instance whose borrowed capacity is
    /// reclaimed: deleted (the default, as a Spot instance is) or shelved.
    pub on_reclaim: InstanceEnd,
}

pub struct InstancePlugin {
    driver: Arc<dyn Driver>,
    options: InstanceOptions,
    /// What the driver is told the slots are (`flavor:instance` slots act
    /// as these do).
    resource_type: &'static str,
}

impl InstancePlugin {
    pub fn new(driver: Arc<dyn Driver>, options: InstanceOptions) -> Self {
        InstancePlugin { driver, options, resource_type: RESOURCE_TYPE }
    }

    /// The slots' hooks for another resource type whose slots are instances.
    pub(crate) fn acting_for(resource_type: &'static str, driver: Arc<dyn Driver>, options: InstanceOptions) -> Self {
        InstancePlugin { driver, options, resource_type }
    }

    /// One driver call per slot, in order; the first failure stops the
    /// round (a retry calls the done ones again with the same keys).
    async fn each_slot(&self, action: &str, hook: &Hook) -> Result<HookOutcome, HookError> {
        let ids = instance_ids(&hook.reservation);
        let mut answers = Vec::new();
        for (i, a) in hook.allocations.iter().enumerate() {
            let consumer = a.get("consumer_id").and_then(Value::as_str).unwrap_or_default();
            // A loan's consumer is the instance itself.
            let instance = ids.get(i).map(String::as_str).or_else(|| a.get("instance_id").and_then(Value::as_str));
            let payload = json!({
                "resource_type": self.resource_type,
                "event_type": hook.event_type,
                "instance_id": instance,
                "consumer_id": consumer,
                "resource_provider": a.get("resource_provider"),
                "resources": a.get("resources"),
                "lease": hook.lease,
                "reservation": hook.reservation,
            });
            let key = format!("{}:{consumer}", hook.idempotency_key);
            let answer = self.driver.call(action, &payload, &key).await?;
            answers.push(json!({"consumer_id": consumer, "instance_id": instance, "answer": answer}));
        }
        Ok(HookOutcome { detail: json!({"action": action, "slots": answers}), effects: Vec::new() })
    }
}

/// The instance ids a reservation names for its slots, in slot order.
fn instance_ids(reservation: &Value) -> Vec<String> {
    match (reservation.get("instance_ids"), reservation.get("instance_id")) {
        (Some(Value::Array(a)), _) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        (_, Some(Value::String(s))) => vec![s.clone()],
        _ => Vec::new(),
    }
}

pub(crate) fn affinity(reservation: &Value) -> Result<Option<bool>, Error> {
    match reservation.get("affinity") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            "none" | "null" | "" => Ok(None),
            _ => Err(Error::invalid(ErrorCode::InvalidLease, format!("affinity {s:?} is not true, false or null"))),
        },
        Some(v) => Err(Error::invalid(ErrorCode::InvalidLease, format!("affinity {v} is not true, false or null"))),
    }
}

/// The most instances one reservation asks for.
pub(crate) const MAX_INSTANCES: i64 = 10_000;

#[async_trait]
impl ResourcePlugin for InstancePlugin {
    fn resource_type(&self) -> &str {
        RESOURCE_TYPE
    }

    fn driver_kind(&self) -> Option<&'static str> {
        Some(self.driver.kind())
    }

    async fn validate(&self, reservation: &Value) -> Result<ResourceRequest, Error> {
        if !reservation.is_object() {
            return Err(Error::invalid(ErrorCode::InvalidLease, "a reservation is a JSON object"));
        }
        let need = |key: &str, range: RangeInclusive<i64>| -> Result<i64, Error> {
            whole_in(reservation, key, range)?
                .ok_or_else(|| Error::invalid(ErrorCode::InvalidLease, format!("virtual:instance needs {key}")))
        };
        let amount = need("amount", 1..=MAX_INSTANCES)?;
        let mut resources = BTreeMap::from([
            ("VCPU".to_string(), need("vcpus", 1..=MAX_AMOUNT)?),
            ("MEMORY_MB".to_string(), need("memory_mb", 1..=MAX_AMOUNT)?),
        ]);
        let disk = whole_in(reservation, "disk_gb", 0..=MAX_AMOUNT)?.unwrap_or(0);
        if disk > 0 {
            resources.insert("DISK_GB".into(), disk);
        }
        check_instance_ids(reservation, amount)?;
        Ok(ResourceRequest::Slots {
            amount: amount as u32,
            resources,
            affinity: affinity(reservation)?,
            resource_properties: query_param(reservation, "resource_properties")?,
            traits: Default::default(),
        })
    }

    fn parameters(&self) -> Option<&'static [Param]> {
        Some(INSTANCE_PARAMETERS)
    }

    fn named_consumers(&self, reservation: &Value) -> Vec<String> {
        instance_ids(reservation)
    }

    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.each_slot("wake_up", hook).await
    }

    async fn before_end(&self, _hook: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome::default())
    }

    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.each_slot(action(self.options.on_end), hook).await
    }

    /// The preemptible instance (the loan's consumer) deleted or shelved,
    /// one driver call per instance, as at a lease's end.
    async fn on_reclaim(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.each_slot(action(self.options.on_reclaim), hook).await
    }
}

/// The driver's action for an instance's end.
fn action(end: InstanceEnd) -> &'static str {
    match end {
        InstanceEnd::Delete => "delete",
        InstanceEnd::Shelve => "shelve",
    }
}

/// A reservation's `instance_ids` (or `instance_id`) fit its `amount`.
pub(crate) fn check_instance_ids(reservation: &Value, amount: i64) -> Result<(), Error> {
    let ids_ok = match (reservation.get("instance_ids"), reservation.get("instance_id")) {
        (Some(Value::Array(a)), None) => a.len() as i64 <= amount && a.iter().all(|v| v.is_string()),
        (None | Some(Value::Null), Some(Value::String(_))) => amount == 1,
        (None | Some(Value::Null), None | Some(Value::Null)) => true,
        _ => false,
    };
    if !ids_ok {
        return Err(Error::invalid(
            ErrorCode::InvalidLease,
            "instance_ids is a list of at most `amount` instance ids (or instance_id, one, when amount is 1)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn validates_instance_reservations() {
        let p = InstancePlugin::new(Arc::new(crate::driver::NoopDriver::new()), InstanceOptions::default());
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
            json!({"amount": 1, "vcpus": 1, "memory_mb": 1, "instance_ids": ["a", "b"]}),
            json!({"amount": 2, "vcpus": 1, "memory_mb": 1, "instance_id": "a"}),
            json!({"amount": 1, "vcpus": 1, "memory_mb": 1, "instance_ids": [1]}),
        ] {
            assert!(p.validate(&bad).await.is_err(), "{bad}");
        }
    }

    /// A number out of range is refused with the range, whichever bound
    /// it misses and however large it is.
    #[tokio::test]
    async fn refusals_name_the_range_and_what_was_given() {
        let p = InstancePlugin::new(Arc::new(crate::driver::NoopDriver::new()), InstanceOptions::default());
        for (bad, says) in [
            (
                json!({"amount": 2_147_483_648_i64, "vcpus": 1, "memory_mb": 1}),
                "amount must be a whole number from 1 to 10000, not 2147483648",
            ),
            (json!({"amount": 0, "vcpus": 1, "memory_mb": 1}), "amount must be a whole number from 1 to 10000, not 0"),
            (
                json!({"amount": 1, "vcpus": 1e20, "memory_mb": 1}),
                "vcpus must be a whole number from 1 to 2147483647, not 1e+20",
            ),
            (
                json!({"amount": 1, "vcpus": "1e20", "memory_mb": 1}),
                "vcpus must be a whole number from 1 to 2147483647, not \"1e20\"",
            ),
            (
                json!({"amount": 1, "vcpus": 1, "memory_mb": 2_147_483_648_i64}),
                "memory_mb must be a whole number from 1 to 2147483647, not 2147483648",
            ),
            (
                json!({"amount": 1, "vcpus": 1, "memory_mb": 1, "disk_gb": -1}),
                "disk_gb must be a whole number from 0 to 2147483647, not -1",
            ),
        ] {
            let Err(e) = p.validate(&bad).await else { panic!("{bad} was taken") };
            assert_eq!(e.detail, says, "{bad}");
        }
    }
}
