//! Which hosts a reservation may use: enrolled, reservable, and matching the
//! reservation's hypervisor and resource property queries.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;
use serde_json::Value;

use crate::inventory::Inventory;
use crate::lease::Demand;
use crate::query::Query;

/// A provider as a reservation sees it: its name, its inventories and, when
/// it is enrolled as a host, its enrolment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Host {
    pub name: String,
    /// `None`: a provider that is not enrolled as a host.
    pub enrolment: Option<Enrolment>,
    pub inventories: BTreeMap<String, Inventory>,
    /// Its Placement traits: what a flavor's `trait:` extra specs read.
    pub traits: BTreeSet<String>,
}

/// What enrolling a provider as a host says of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Enrolment {
    pub reservable: bool,
    /// The host's capabilities: what `resource_properties` queries read.
    pub capabilities: BTreeMap<String, Value>,
}

impl Host {
    /// A hypervisor property as Blazar names it: what
    /// `hypervisor_properties` queries read.
    fn hypervisor(&self, key: &str) -> Option<Value> {
        let total = |c: &str| self.inventories.get(c).map(|i| Value::from(i.total));
        match key {
            "vcpus" => total("VCPU"),
            "memory_mb" => total("MEMORY_MB"),
            "local_gb" => total("DISK_GB"),
            "hypervisor_hostname" | "name" | "service_name" => Some(Value::from(self.name.clone())),
            _ => None,
        }
    }
}

/// The capability that keeps a host for some projects (as Chameleon's
/// `authorized_projects`): their ids, as a list or comma-separated.
pub const AUTHORIZED_PROJECTS: &str = "authorized_projects";

/// Whether `host` may serve `demand` for a lease of `project`: it is an
/// enrolled, reservable host that admits the project and whose properties
/// match the demand's queries (an absent query matches every host). A
/// demand for nothing uses no host.
pub fn eligible(host: &Host, demand: &Demand, project: &str) -> bool {
    let Some(Enrolment { reservable, capabilities }) = &host.enrolment else {
        return false;
    };
    let caps_match = |q: &Option<Query>| q.as_ref().is_none_or(|q| q.matches(&|k| capabilities.get(k).cloned()));
    *reservable
        && admits(capabilities, project)
        && match demand {
            Demand::Hosts { hypervisor_properties, resource_properties, .. } => {
                hypervisor_properties.as_ref().is_none_or(|q| q.matches(&|k| host.hypervisor(k)))
                    && caps_match(resource_properties)
            }
            Demand::Slots { resource_properties, traits, .. } => {
                caps_match(resource_properties) && traits.matches(&host.traits)
            }
            Demand::Nothing => false,
        }
}

/// The capability that gives a host a cleaning time of its own, in minutes
/// (a host whose disks take longer to wipe): it overrides the configured
/// `cleaning_time` for that host.
pub const CLEANING_TIME: &str = "cleaning_time";

/// How long `host` stays unreservable after a lease on it ends: its own
/// `cleaning_time` capability (whole minutes, a number or a string of
/// digits), else `default`. A value that is no count of minutes is
/// passed over for the default.
pub fn cleaning_time(host: &Host, default: Duration) -> Duration {
    let own = host.enrolment.as_ref().and_then(|e| e.capabilities.get(CLEANING_TIME)).and_then(|v| match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    });
    own.and_then(|m| i64::try_from(m).ok()).and_then(Duration::try_minutes).unwrap_or(default)
}

/// Whether a host with these capabilities may be reserved by `project`:
/// every project, unless it names the projects it is kept for. A value that
/// names none (an empty list, a number) admits no project: a typo keeps a
/// host closed, never open.
fn admits(capabilities: &BTreeMap<String, Value>, project: &str) -> bool {
    match capabilities.get(AUTHORIZED_PROJECTS) {
        None => true,
        Some(Value::String(list)) => list.split(',').any(|p| p.trim() == project),
        Some(Value::Array(list)) => list.iter().any(|p| p.as_str() == Some(project)),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host(reservable: bool, caps: Value) -> Host {
        Host {
            name: "h1".into(),
            enrolment: Some(Enrolment { reservable, capabilities: serde_json::from_value(caps).unwrap() }),
            inventories: BTreeMap::from([
                ("VCPU".into(), Inventory { total: 8, ..Default::default() }),
                ("MEMORY_MB".into(), Inventory { total: 4096, ..Default::default() }),
            ]),
            traits: BTreeSet::from(["CUSTOM_GPU".to_string()]),
        }
    }
    fn query(v: Value) -> Option<Query> {
        crate::query::parse("q", &v).unwrap()
    }
    fn hosts(hypervisor: Value, resource: Value) -> Demand {
        Demand::Hosts { min: 1, max: 1, hypervisor_properties: query(hypervisor), resource_properties: query(resource) }
    }
    fn slots(resource: Value) -> Demand {
        Demand::Slots {
            amount: 1,
            resources: BTreeMap::from([("VCPU".into(), 1)]),
            affinity: None,
            resource_properties: query(resource),
            traits: Default::default(),
        }
    }

    #[test]
    fn only_enrolled_reservable_hosts_serve() {
        let any = hosts(json!([]), json!([]));
        assert!(eligible(&host(true, json!({})), &any, "p1"));
        assert!(!eligible(&host(false, json!({})), &any, "p1"));
        assert!(!eligible(&Host { enrolment: None, ..host(true, json!({})) }, &any, "p1"));
        assert!(!eligible(&host(false, json!({})), &slots(json!([])), "p1"));
    }

    #[test]
    fn a_demand_for_nothing_uses_no_host() {
        assert!(!eligible(&host(true, json!({})), &Demand::Nothing, "p1"));
    }

    #[test]
    fn hypervisor_properties_read_inventories_and_the_name() {
        let h = host(true, json!({}));
        assert!(eligible(&h, &hosts(json!([">=", "$vcpus", 8]), json!([])), "p1"));
        assert!(!eligible(&h, &hosts(json!([">", "$vcpus", 8]), json!([])), "p1"));
        assert!(eligible(&h, &hosts(json!(["==", "$memory_mb", 4096]), json!([])), "p1"));
        assert!(eligible(&h, &hosts(json!(["==", "$hypervisor_hostname", "h1"]), json!([])), "p1"));
        assert!(eligible(&h, &hosts(json!(["==", "$service_name", "h1"]), json!([])), "p1"));
        // A class the host lacks, or a property no hypervisor has, matches nothing.
        assert!(!eligible(&h, &hosts(json!([">=", "$local_gb", 0]), json!([])), "p1"));
        assert!(!eligible(&h, &hosts(json!(["==", "$gpus", 1]), json!([])), "p1"));
    }

    #[test]
    fn resource_properties_read_capabilities() {
        let h = host(true, json!({"gpus": 2, "zone": "a"}));
        assert!(eligible(&h, &hosts(json!([]), json!([">=", "$gpus", 2])), "p1"));
        assert!(!eligible(&h, &hosts(json!([]), json!([">", "$gpus", 2])), "p1"));
        assert!(eligible(&h, &slots(json!(["==", "$zone", "a"])), "p1"));
        assert!(!eligible(&h, &slots(json!(["==", "$zone", "b"])), "p1"));
        // Capabilities are not hypervisor properties.
        assert!(!eligible(&h, &hosts(json!(["==", "$zone", "a"]), json!([])), "p1"));
    }

    #[test]
    fn authorized_projects_keep_a_host_for_those_projects() {
        let any = hosts(json!([]), json!([]));
        let listed = host(true, json!({"authorized_projects": "p1, p2"}));
        assert!(eligible(&listed, &any, "p1") && eligible(&listed, &any, "p2"));
        assert!(!eligible(&listed, &any, "p3"));
        let array = host(true, json!({"authorized_projects": ["p2"]}));
        assert!(eligible(&array, &any, "p2") && !eligible(&array, &any, "p1"));
        assert!(!eligible(&host(true, json!({"authorized_projects": 7})), &any, "p1"), "a typo keeps it closed");
        assert!(!eligible(&host(true, json!({"authorized_projects": ""})), &any, "p1"));
        assert!(eligible(&host(true, json!({})), &any, "anyone"));
    }

    #[test]
    fn a_host_may_have_a_cleaning_time_of_its_own() {
        let ten = Duration::minutes(10);
        assert_eq!(cleaning_time(&host(true, json!({})), ten), ten);
        assert_eq!(cleaning_time(&host(true, json!({"cleaning_time": 45})), ten), Duration::minutes(45));
        assert_eq!(cleaning_time(&host(true, json!({"cleaning_time": "0"})), ten), Duration::zero());
        assert_eq!(cleaning_time(&host(true, json!({"cleaning_time": "soon"})), ten), ten);
        assert_eq!(cleaning_time(&host(true, json!({"cleaning_time": -5})), ten), ten);
    }

    #[test]
    fn slots_read_the_hosts_traits() {
        let h = host(true, json!({}));
        let with = |t: crate::flavor::Traits| match slots(json!([])) {
            Demand::Slots { amount, resources, affinity, resource_properties, .. } => {
                Demand::Slots { amount, resources, affinity, resource_properties, traits: t }
            }
            _ => unreachable!(),
        };
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let required = crate::flavor::Traits { required: names(&["CUSTOM_GPU"]), ..Default::default() };
        assert!(eligible(&h, &with(required), "p1"));
        let forbidden = crate::flavor::Traits { forbidden: names(&["CUSTOM_GPU"]), ..Default::default() };
        assert!(!eligible(&h, &with(forbidden), "p1"));
        let any_of =
            crate::flavor::Traits { any_of: vec![names(&["CUSTOM_FPGA", "CUSTOM_GPU"])], ..Default::default() };
        assert!(eligible(&h, &with(any_of), "p1"));
        let none_of = crate::flavor::Traits { any_of: vec![names(&["CUSTOM_FPGA"])], ..Default::default() };
        assert!(!eligible(&h, &with(none_of), "p1"));
    }
}
