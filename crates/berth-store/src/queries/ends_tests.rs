//! `Ends` reads one host per instant that cleans for the default time, but
//! every host that names a cleaning time of its own: only such a host can
//! make an end an instant other than the end plus the default. Hosts'
//! leases end at once, some of the hosts cleaning in their own time; where
//! they are many (past the 64 probed one by one) every hold ending then is
//! read for them.

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use chrono::{DateTime, Duration, DurationRound, Utc};
use serde_json::json;
use uuid::Uuid;

use super::Ends;
use crate::commands::{HostChange, LeaseDates, NewHost, NewLease, NewReservation};
use crate::testing::TestDatabase;
use crate::Store;

/// Enrols `n` hosts, books a lease on each ending at one instant, and
/// gives that instant and the hosts in uuid order: the order an instant's
/// hosts are read in.
async fn ending_at_once(store: &Store, n: usize) -> (DateTime<Utc>, Vec<Uuid>) {
    let meta = EventMeta::default();
    let mut hosts = Vec::new();
    for i in 0..n {
        let new = NewHost {
            name: format!("h{i}"),
            resources: Some((16, 4096, 100)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        hosts.push((store.enrol_host(&meta, new).await.unwrap(), format!("h{i}")));
    }
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
    let mut ids: Vec<Uuid> = hosts.into_iter().map(|h| h.0).collect();
    ids.sort();
    (end, ids)
}

/// Has `host` clean for `minutes` after each hold.
async fn cleans_for(store: &Store, host: Uuid, minutes: i64) {
    let capabilities = BTreeMap::from([("cleaning_time".into(), json!(minutes))]);
    store.update_host(&EventMeta::default(), host, HostChange { capabilities, ..Default::default() }).await.unwrap();
}

/// Up to `n` instants from an hour before `end`, for a lease of any host.
async fn instants(store: &Store, end: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let any = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    let c = store.client().await.unwrap();
    let mut ends =
        Ends::new("p1", vec![&any], store.cleaning_time(), end - Duration::hours(1), end + Duration::hours(10));
    ends.next(&c, n).await.unwrap()
}

#[tokio::test]
async fn a_host_cleaning_in_its_own_time_gives_its_instant_among_many_ending_then() {
    let db = TestDatabase::new().await;
    let cleaning = Duration::minutes(30);
    let store = db.store(4).with_cleaning_time(cleaning.to_std().unwrap());
    let (end, hosts) = ending_at_once(&store, 6).await;
    // The last read of its instant cleans in no time.
    cleans_for(&store, hosts[5], 0).await;
    assert_eq!(
        instants(&store, end, 2).await,
        vec![end, end + cleaning],
        "the host cleaning in no time, then the others"
    );
}

#[tokio::test]
async fn many_hosts_cleaning_in_their_own_time_each_give_their_instant() {
    let db = TestDatabase::new().await;
    let cleaning = Duration::minutes(30);
    let store = db.store(4).with_cleaning_time(cleaning.to_std().unwrap());
    let (end, hosts) = ending_at_once(&store, 73).await;
    // The first read cleans for the default time; the 70 after it, more
    // than the 64 probed one by one, for 0 to 70 minutes but 30.
    let own = [0, 10, 20, 40, 50, 60, 70];
    for (k, host) in hosts[3..].iter().enumerate() {
        cleans_for(&store, *host, own[k % own.len()]).await;
    }
    let mut want: Vec<DateTime<Utc>> = own.iter().map(|m| end + Duration::minutes(*m)).collect();
    want.push(end + cleaning);
    want.sort();
    assert_eq!(instants(&store, end, 10).await, want);
}
