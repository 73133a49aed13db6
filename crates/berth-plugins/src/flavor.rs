//! `flavor:instance`: `amount` instances of a flavor for the lease's
//! window, as Blazar's flavor plugin reserves them, with affinity (which
//! Blazar's refuses) and the flavor's traits honoured.
//!
//! The flavors are the operator's, declared in `[plugins.flavor.flavors]`
//! by id, with Nova's fields (`vcpus`, `ram`, `disk`, `ephemeral`,
//! `extra_specs`); a reservation names one by `flavor_id` (or by its name
//! where no other flavor has it). What an instance takes and which hosts
//! may hold it are berth-core's (`flavor::Flavor::demand`): each instance is
//! a slot, as for `virtual:instance`, so the slots' hooks are that plugin's
//! and a Nova-style claim drawing from the reservation's class takes from
//! them.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use berth_core::error::ErrorCode;
use berth_core::flavor::Flavor;
use berth_core::Error;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::driver::Driver;
use crate::host::{query_param, whole_in};
use crate::instance::{affinity, check_instance_ids, InstanceEnd, InstanceOptions, InstancePlugin, MAX_INSTANCES};
use crate::params::{param, Param, ParamType};
use crate::plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};

pub const RESOURCE_TYPE: &str = "flavor:instance";

/// The parameters a reservation of this type takes.
const FLAVOR_PARAMETERS: &[Param] = &[
    param("flavor_id", ParamType::Id),
    param("amount", ParamType::Integer),
    param("affinity", ParamType::OptionalBoolean),
    param("resource_properties", ParamType::Query),
    param("instance_ids", ParamType::StringList),
    param("instance_id", ParamType::String),
    // false: keep its slots when a host becomes unusable (only marked).
    param("heal", ParamType::Boolean),
    // true: what its slots hold and do not use may be lent to preemptible consumers.
    param("lend_idle", ParamType::Boolean),
];

/// `[plugins.flavor]`: the flavors reservations may name, by id, and what
/// happens to the instances at a lease's end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlavorOptions {
    pub flavors: BTreeMap<String, Flavor>,
    pub on_end: InstanceEnd,
}

impl FlavorOptions {
    /// Every flavor asks for something and has good extra specs.
    pub fn check(&self) -> Result<(), Error> {
        for (id, f) in &self.flavors {
            f.demand().map_err(|e| Error::invalid(ErrorCode::Invalid, format!("flavors.{id:?}: {e}")))?;
        }
        Ok(())
    }
}

pub struct FlavorPlugin {
    flavors: BTreeMap<String, Flavor>,
    /// The slots' hooks: those of `virtual:instance`, told this type.
    slots: InstancePlugin,
}

impl FlavorPlugin {
    /// The plugin over the configured flavors; a flavor that asks for
    /// nothing or has a bad extra spec is refused here, at start.
    pub fn new(driver: Arc<dyn Driver>, options: FlavorOptions) -> Result<Self, Error> {
        options.check()?;
        let slots = InstancePlugin::acting_for(
            RESOURCE_TYPE,
            driver,
            InstanceOptions { on_end: options.on_end, ..Default::default() },
        );
        Ok(FlavorPlugin { flavors: options.flavors, slots })
    }

    /// The flavor `id` names: by id, else by a name no other flavor has.
    fn flavor(&self, id: &str) -> Result<&Flavor, Error> {
        if let Some(f) = self.flavors.get(id) {
            return Ok(f);
        }
        let mut named = self.flavors.values().filter(|f| f.name == id);
        match (named.next(), named.next()) {
            (Some(f), None) => Ok(f),
            (Some(_), Some(_)) => Err(Error::invalid(
                ErrorCode::InvalidLease,
                format!("flavor name {id:?} is not unique: name the flavor by its id"),
            )),
            (None, _) => Err(Error::invalid(
                ErrorCode::InvalidLease,
                format!(
                    "flavor {id:?} is not one of the configured flavors ({})",
                    self.flavors.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

#[async_trait]
impl ResourcePlugin for FlavorPlugin {
    fn resource_type(&self) -> &str {
        RESOURCE_TYPE
    }

    fn driver_kind(&self) -> Option<&'static str> {
        self.slots.driver_kind()
    }

    fn parameters(&self) -> Option<&'static [Param]> {
        Some(FLAVOR_PARAMETERS)
    }

    async fn validate(&self, reservation: &Value) -> Result<ResourceRequest, Error> {
        let invalid = |detail: String| Error::invalid(ErrorCode::InvalidLease, detail);
        let Some(id) = reservation.get("flavor_id").and_then(Value::as_str) else {
            return Err(invalid("flavor:instance needs flavor_id".into()));
        };
        let Some(amount) = whole_in(reservation, "amount", 1..=MAX_INSTANCES)? else {
            return Err(invalid("flavor:instance needs amount".into()));
        };
        let (resources, traits) = self.flavor(id)?.demand().map_err(|e| invalid(format!("flavor {id:?}: {e}")))?;
        check_instance_ids(reservation, amount)?;
        Ok(ResourceRequest::Slots {
            amount: amount as u32,
            resources,
            affinity: affinity(reservation)?,
            resource_properties: query_param(reservation, "resource_properties")?,
            traits,
        })
    }

    fn named_consumers(&self, reservation: &Value) -> Vec<String> {
        self.slots.named_consumers(reservation)
    }

    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.slots.on_start(hook).await
    }

    async fn before_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.slots.before_end(hook).await
    }

    async fn on_end(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        self.slots.on_end(hook).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plugin() -> FlavorPlugin {
        let options: FlavorOptions = serde_json::from_value(json!({"flavors": {
            "f1": {"name": "gpu.small", "vcpus": 2, "ram": 1024, "disk": 10,
                   "extra_specs": {"trait:CUSTOM_GPU": "required", "resources:CUSTOM_GPU_SLICE": "1"}},
            "f2": {"name": "dup", "vcpus": 1, "ram": 512},
            "f3": {"name": "dup", "vcpus": 1, "ram": 512},
        }}))
        .unwrap();
        FlavorPlugin::new(Arc::new(crate::driver::NoopDriver::new()), options).unwrap()
    }

    #[tokio::test]
    async fn a_flavor_becomes_slots_with_its_traits() {
        let p = plugin();
        for id in ["f1", "gpu.small"] {
            let r = p.validate(&json!({"flavor_id": id, "amount": "2", "affinity": "false"})).await.unwrap();
            let ResourceRequest::Slots { amount, resources, affinity, traits, .. } = r else { panic!("slots") };
            assert_eq!((amount, affinity), (2, Some(false)));
            assert_eq!(resources.get("CUSTOM_GPU_SLICE"), Some(&1));
            assert_eq!(resources.get("DISK_GB"), Some(&10));
            assert!(traits.required.contains("CUSTOM_GPU"));
        }
        // Healing reads `heal` from every slot reservation: declared, it is
        // listed in `GET /v1/plugins` and type-checked like the others.
        assert!(p.validate(&json!({"flavor_id": "f1", "amount": 1, "heal": false})).await.is_ok());
        assert!(p.parameters().unwrap_or_default().iter().any(|q| q.name == "heal"), "heal is declared");
        for bad in [
            json!({"amount": 1}),
            json!({"flavor_id": "f1"}),
            json!({"flavor_id": "f1", "amount": 0}),
            json!({"flavor_id": "nope", "amount": 1}),
            json!({"flavor_id": "dup", "amount": 1}),
            json!({"flavor_id": "f1", "amount": 1, "affinity": "maybe"}),
        ] {
            assert!(p.validate(&bad).await.is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bad_flavor_stops_the_start() {
        let options: FlavorOptions =
            serde_json::from_value(json!({"flavors": {"x": {"vcpus": 1, "extra_specs": {"trait:CUSTOM_A": "maybe"}}}}))
                .unwrap();
        let e = FlavorPlugin::new(Arc::new(crate::driver::NoopDriver::new()), options).err().unwrap();
        assert!(e.detail.contains("flavors.\"x\""), "{}", e.detail);
    }
}
