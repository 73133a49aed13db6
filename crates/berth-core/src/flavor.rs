//! Flavors as Nova defines them, and what one instance of a flavor asks of
//! a host: the resources it takes and the traits the host must, must not,
//! or must in part have.
//!
//! A flavor's vcpus, ram and disk (plus ephemeral) become `VCPU`,
//! `MEMORY_MB` and `DISK_GB`, as Blazar's flavor plugin counts them;
//! `hw:cpu_policy=dedicated` asks `PCPU` instead of `VCPU`. Extra specs:
//! `resources:CLASS=N` sets a class's amount (0 drops it),
//! `trait:NAME=required|forbidden` asks a host trait or its absence, and
//! `trait:in:A,B=required` asks at least one of the traits (Placement
//! 1.39's `required=in:A,B`). Other extra specs are Nova's business and are
//! passed over. Granular groups (`resources1:`, `trait1:`) are refused:
//! Berth places an instance on one provider.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A flavor: what each of its instances takes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Flavor {
    /// Shown back; the flavor is named by its id in reservations (or by
    /// this name where it is unique).
    pub name: String,
    pub vcpus: i64,
    /// Megabytes.
    pub ram: i64,
    /// Root disk, gigabytes.
    pub disk: i64,
    /// Ephemeral disk, gigabytes.
    pub ephemeral: i64,
    pub extra_specs: BTreeMap<String, String>,
}

/// The traits a host must have, must not have, and of which it must have
/// at least one per group. Empty: every host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Traits {
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub required: BTreeSet<String>,
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub forbidden: BTreeSet<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<BTreeSet<String>>,
}

impl Traits {
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.forbidden.is_empty() && self.any_of.is_empty()
    }

    /// Whether a host with traits `has` satisfies every rule.
    pub fn matches(&self, has: &BTreeSet<String>) -> bool {
        self.required.is_subset(has)
            && self.forbidden.is_disjoint(has)
            && self.any_of.iter().all(|group| !group.is_disjoint(has))
    }
}

/// A trait or class name as Placement writes them: upper-case letters,
/// digits and underscores.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Flavor {
    /// What one instance takes and which hosts may hold it. `Err` names
    /// the field at fault.
    pub fn demand(&self) -> Result<(BTreeMap<String, i64>, Traits), String> {
        for (field, v) in [("vcpus", self.vcpus), ("ram", self.ram), ("disk", self.disk), ("ephemeral", self.ephemeral)]
        {
            if !(0..=i64::from(i32::MAX)).contains(&v) {
                return Err(format!("flavor {field} {v} is out of range"));
            }
        }
        let cpu = if self.extra_specs.get("hw:cpu_policy").map(String::as_str) == Some("dedicated") {
            "PCPU"
        } else {
            "VCPU"
        };
        let mut resources = BTreeMap::from([
            (cpu.to_string(), self.vcpus),
            ("MEMORY_MB".to_string(), self.ram),
            ("DISK_GB".to_string(), self.disk + self.ephemeral),
        ]);
        let mut traits = Traits::default();
        for (key, value) in &self.extra_specs {
            if let Some(class) = key.strip_prefix("resources:") {
                let n: i64 = value.trim().parse().map_err(|_| format!("extra spec {key}={value:?} is not a count"))?;
                if !is_name(class) || !(0..=i64::from(i32::MAX)).contains(&n) {
                    return Err(format!("extra spec {key}={value:?} names no resource class and count"));
                }
                resources.insert(class.to_string(), n);
            } else if let Some(rest) = key.strip_prefix("trait:") {
                trait_spec(&mut traits, key, rest, value)?;
            } else if is_granular(key) {
                return Err(format!("extra spec {key}: granular groups are not supported (one provider per instance)"));
            }
        }
        resources.retain(|_, n| *n > 0);
        if resources.is_empty() {
            return Err("the flavor asks for no resources".into());
        }
        if let Some(t) = traits.required.intersection(&traits.forbidden).next() {
            return Err(format!("trait {t} is both required and forbidden"));
        }
        Ok((resources, traits))
    }
}

/// `resources1:`, `trait_gpu:`: a numbered or named request group.
fn is_granular(key: &str) -> bool {
    ["resources", "trait"].iter().any(|p| key.strip_prefix(p).is_some_and(|rest| rest.contains(':')))
}

fn trait_spec(traits: &mut Traits, key: &str, rest: &str, value: &str) -> Result<(), String> {
    let bad = || format!("extra spec {key}={value:?}: a trait is required or forbidden");
    if let Some(list) = rest.strip_prefix("in:") {
        let group: BTreeSet<String> = list.split(',').map(|t| t.trim().to_string()).collect();
        if group.iter().any(|t| !is_name(t)) {
            return Err(format!("extra spec {key}: in: lists trait names separated by commas"));
        }
        if value != "required" {
            return Err(format!("extra spec {key}={value:?}: any-of traits can only be required"));
        }
        traits.any_of.push(group);
        return Ok(());
    }
    if !is_name(rest) {
        return Err(format!("extra spec {key}: {rest:?} is not a trait name"));
    }
    match value {
        "required" => traits.required.insert(rest.to_string()),
        "forbidden" => traits.forbidden.insert(rest.to_string()),
        _ => return Err(bad()),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flavor(specs: &[(&str, &str)]) -> Flavor {
        Flavor {
            name: "m1".into(),
            vcpus: 2,
            ram: 2048,
            disk: 20,
            ephemeral: 5,
            extra_specs: specs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }
    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn vcpus_ram_and_disks_become_classes() {
        let (r, t) = flavor(&[("hw:mem_page_size", "large")]).demand().unwrap();
        assert_eq!(r, BTreeMap::from([("VCPU".into(), 2), ("MEMORY_MB".into(), 2048), ("DISK_GB".into(), 25)]));
        assert!(t.is_empty());
        let (r, _) = flavor(&[("hw:cpu_policy", "dedicated")]).demand().unwrap();
        assert_eq!(r.get("PCPU"), Some(&2));
        assert!(!r.contains_key("VCPU"));
    }

    #[test]
    fn resources_extra_specs_set_and_drop_classes() {
        let (r, _) = flavor(&[("resources:CUSTOM_GPU", "1"), ("resources:DISK_GB", "0")]).demand().unwrap();
        assert_eq!(r, BTreeMap::from([("VCPU".into(), 2), ("MEMORY_MB".into(), 2048), ("CUSTOM_GPU".into(), 1)]));
        for bad in [("resources:CUSTOM_GPU", "x"), ("resources:gpu", "1"), ("resources:VCPU", "-1")] {
            assert!(flavor(&[bad]).demand().is_err(), "{bad:?}");
        }
        assert!(flavor(&[("resources1:VCPU", "1")]).demand().is_err(), "granular groups are refused");
    }

    #[test]
    fn traits_are_required_forbidden_or_any_of() {
        let (_, t) = flavor(&[
            ("trait:HW_CPU_X86_AVX2", "required"),
            ("trait:CUSTOM_SLOW", "forbidden"),
            ("trait:in:CUSTOM_A100,CUSTOM_H100", "required"),
        ])
        .demand()
        .unwrap();
        assert!(t.matches(&set(&["HW_CPU_X86_AVX2", "CUSTOM_H100"])));
        assert!(!t.matches(&set(&["HW_CPU_X86_AVX2", "CUSTOM_H100", "CUSTOM_SLOW"])), "forbidden");
        assert!(!t.matches(&set(&["HW_CPU_X86_AVX2"])), "none of the any-of group");
        assert!(!t.matches(&set(&["CUSTOM_A100"])), "the required one missing");
        for bad in [
            ("trait:CUSTOM_X", "preferred"),
            ("trait:in:CUSTOM_A,CUSTOM_B", "forbidden"),
            ("trait:in:CUSTOM_A,", "required"),
            ("trait:lower", "required"),
            ("trait1:CUSTOM_X", "required"),
        ] {
            assert!(flavor(&[bad]).demand().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_flavor_of_nothing_is_refused() {
        let f = Flavor { name: "zero".into(), ..Default::default() };
        assert!(f.demand().is_err());
        assert!(Flavor { vcpus: -1, ..flavor(&[]) }.demand().is_err());
    }
}
