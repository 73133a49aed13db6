//! What the scale scenarios book and ask for: one-host leases of the
//! bench project at random 2-hour windows over a year, each host whole.

use std::collections::BTreeMap;

use anyhow::Result;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use berth_store::commands::NewReservation;
use chrono::{DateTime, Utc};
use rand::Rng;
use serde_json::json;

pub(crate) fn meta() -> EventMeta {
    EventMeta { actor: Some("bench".into()), ..Default::default() }
}

pub(crate) fn whole() -> BTreeMap<String, i64> {
    BTreeMap::from([("VCPU".to_string(), 64), ("MEMORY_MB".to_string(), 262_144), ("DISK_GB".to_string(), 2_000)])
}

/// A random 2-hour window, on the hour, within a year of `base`.
pub(crate) fn random_window(base: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let h = rand::thread_rng().gen_range(0..24 * 365);
    let start = base + chrono::Duration::hours(h);
    (start, start + chrono::Duration::hours(2))
}

/// One host, in `rack` when given.
pub(crate) fn one_host(rack: Option<&str>) -> Result<NewReservation> {
    let query = match rack {
        Some(r) => berth_core::query::parse("resource_properties", &json!(["==", "$rack", r]))?,
        None => None,
    };
    Ok(NewReservation {
        resource_type: "physical:host".into(),
        params: json!({"min": 1, "max": 1}),
        demand: Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: query },
    })
}
