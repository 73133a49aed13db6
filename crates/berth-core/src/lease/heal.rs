//! Healing: what a reservation asks of the hosts that replace the unusable
//! ones it holds. Pure; the store re-places with the scheduler.

use serde_json::Value;

use super::record::Demand;

/// Whether a reservation's parameters let it be healed: all but those that
/// say `"heal": false` (Slurm's static allocation: they keep their hosts and
/// are only marked).
pub fn wants_heal(params: &Value) -> bool {
    !matches!(params.get("heal"), Some(Value::Bool(false)))
        && !params.get("heal").and_then(Value::as_str).is_some_and(|s| s.eq_ignore_ascii_case("false"))
}

/// What replaces `lost` of a reservation's slots: as many hosts (or slots)
/// with the same properties; a slot reservation's affinity holds among the
/// replacements only when every slot moves (the others stay where they are).
pub fn replacement(demand: &Demand, lost: usize, all: usize) -> Demand {
    let mut d = demand.exactly(u32::try_from(lost).unwrap_or(u32::MAX));
    if let Demand::Slots { affinity, .. } = &mut d {
        if lost != all && *affinity != Some(false) {
            *affinity = None;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn only_heal_false_opts_out() {
        assert!(wants_heal(&json!({})));
        assert!(wants_heal(&json!({"heal": true})));
        assert!(!wants_heal(&json!({"heal": false})));
        assert!(!wants_heal(&json!({"heal": "False"})));
    }

    #[test]
    fn replacements_keep_the_properties_and_count_what_was_lost() {
        let hosts = Demand::Hosts { min: 2, max: 4, hypervisor_properties: None, resource_properties: None };
        assert_eq!(
            replacement(&hosts, 1, 3),
            Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None }
        );
        let slots = Demand::Slots {
            amount: 3,
            resources: BTreeMap::from([("VCPU".into(), 2)]),
            affinity: Some(true),
            resource_properties: None,
            traits: Default::default(),
        };
        match replacement(&slots, 3, 3) {
            Demand::Slots { amount: 3, affinity: Some(true), .. } => {}
            other => panic!("{other:?}"),
        }
        match replacement(&slots, 1, 3) {
            Demand::Slots { amount: 1, affinity: None, .. } => {}
            other => panic!("{other:?}"),
        }
    }
}
