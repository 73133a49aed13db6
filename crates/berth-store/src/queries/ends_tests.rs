//! `Ends` reads one host per instant that cleans for the default time, but
//! every host that names a cleaning time of its own: only such a host can
//! make an end an instant other than the end plus the default. Six hosts'
//! leases end at once; the last of them by uuid (read last of its instant)
//! cleans in no time, so its end is an instant itself.

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use chrono::{Duration, DurationRound};
use serde_json::json;

use super::Ends;
use crate::commands::{HostChange, LeaseDates, NewHost, NewLease, NewReservation};
use crate::testing::TestDatabase;

#[tokio::test]
async fn a_host_cleaning_in_its_own_time_gives_its_instant_among_many_ending_then() {
    let db = TestDatabase::new().await;
    let cleaning = Duration::minutes(30);
    let store = db.store(4).with_cleaning_time(cleaning.to_std().unwrap());
    let meta = EventMeta::default();
    let mut hosts = Vec::new();
    for i in 0..6 {
        let new = NewHost {
            name: format!("h{i}"),
            resources: Some((16, 4096, 100)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        hosts.push((store.enrol_host(&meta, new).await.unwrap(), format!("h{i}")));
    }
    let own = hosts.iter().map(|h| h.0).max().unwrap();
    let change =
        HostChange { capabilities: BTreeMap::from([("cleaning_time".into(), json!(0))]), ..Default::default() };
    store.update_host(&meta, own, change).await.unwrap();
    let end = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    for (id, name) in &hosts {
        let on = berth_core::query::parse("q", &json!(["==", "$name", name])).unwrap();
        let demand = Demand::Hosts { min: 1, max: 1, hypervisor_properties: on, resource_properties: None };
        let new = NewLease {
            name: format!("on-{id}"),
            project_id: "p1".into(),
            user_id: "u".into(),
            dates: LeaseDates::One {
                start: DateSpec::At(end - Duration::hours(2)),
                end: DateSpec::At(end),
                before_end: None,
            },
            reservations: vec![NewReservation { resource_type: "physical:host".into(), params: json!({}), demand }],
        };
        store.create_lease(&meta, new).await.unwrap();
    }
    let any = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    let c = store.client().await.unwrap();
    let from = end - Duration::hours(1);
    let mut ends = Ends::new("p1", vec![&any], cleaning, from, end + Duration::hours(10));
    let instants = ends.next(&c, 2).await.unwrap();
    assert_eq!(instants, vec![end, end + cleaning], "the host cleaning in no time, then the others");
}
