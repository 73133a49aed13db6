//! Availability advice tried on the few hosts free at each start time
//! (`queries::free`) answers what it answered when it read every candidate
//! over the whole range: the same windows, in the same order. Checked
//! against that reading, kept here as the reference, on a cloud booked at
//! random with racks, cleaning times (the default and hosts' own, no longer
//! than it), maintenance, and hosts that may not be placed on, for
//! whole-host and instance demands; then again as the calendar fills until
//! little is free.

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::schedule;
use berth_core::{EventMeta, Window};
use chrono::{DateTime, Duration, DurationRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use uuid::Uuid;

use super::advice::Availability;
use super::fit::{candidate_ids, decide, gather, Item};
use crate::commands::{Demands, LeaseDates, NewHost, NewLease, NewMaintenance, NewReservation};
use crate::testing::TestDatabase;
use crate::Store;

const HOSTS: usize = 30;

/// The answer read from every candidate over the whole range: start times
/// at `from` and at every end of a hold on a candidate, each decided on
/// all of them.
async fn on_every_host(
    store: &Store,
    demands: &[Demand],
    duration: Duration,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    limit: usize,
) -> Vec<Availability> {
    let c = store.client().await.unwrap();
    let items: Vec<Item> = demands.iter().map(|d| Item::Place(d, Vec::new())).collect();
    let span = Window { start: from, end: Some(until) };
    let ids = candidate_ids(&c, "p1", &items).await.unwrap();
    let g = gather(&c, &ids, span, span, &[], store.cleaning_time()).await.unwrap();
    let ends = g.candidates.iter().flat_map(|c| c.holds.values().flatten().map(|h| h.0));
    let mut out = Vec::new();
    for start in schedule::start_times(ends, from, until - duration) {
        let window = Window { start, end: Some(start + duration) };
        if decide(&mut g.clone(), "p1", &items, &[window]).is_ok() {
            out.push(Availability { start, end: start + duration });
            if out.len() >= limit {
                break;
            }
        }
    }
    out
}

/// Thirty hosts in three racks, three with GPUs; two with a cleaning time of their own, one
/// disabled, one unreservable, one kept for another project, one under
/// maintenance for a day.
async fn cloud(store: &Store, base: DateTime<Utc>) -> Vec<Uuid> {
    let meta = EventMeta::default();
    let mut ids = Vec::new();
    for i in 0..HOSTS {
        let mut capabilities = BTreeMap::from([("rack".to_string(), Value::from(format!("r{}", i % 3)))]);
        match i {
            3 => capabilities.insert("cleaning_time".into(), json!(0)),
            4 => capabilities.insert("cleaning_time".into(), json!("20")),
            5 => capabilities.insert("authorized_projects".into(), json!("other")),
            _ => None,
        };
        if i % 10 == 1 {
            capabilities.insert("gpus".into(), json!(4));
        }
        let new =
            NewHost { name: format!("h{i:02}"), resources: Some((16, 4096, 100)), reservable: i != 6, capabilities };
        ids.push(store.enrol_host(&meta, new).await.unwrap());
    }
    store.set_host_disabled(&meta, ids[7], true, None, &Demands::new()).await.unwrap();
    let day = (base + Duration::days(2), base + Duration::days(3));
    let maintenance = NewMaintenance { hosts: vec![ids[8]], start: day.0, end: day.1, heal: false, reason: None };
    store.schedule_maintenance(&meta, &maintenance, &Demands::new()).await.unwrap();
    ids
}

fn hosts(rack: Option<usize>, n: u32) -> Demand {
    let query = rack.map(|r| berth_core::query::parse("q", &json!(["==", "$rack", format!("r{r}")])).unwrap().unwrap());
    Demand::Hosts { min: n, max: n, hypervisor_properties: None, resource_properties: query }
}

fn with_gpus(n: u32) -> Demand {
    let query = berth_core::query::parse("q", &json!([">=", "$gpus", 2])).unwrap();
    Demand::Hosts { min: n, max: n, hypervisor_properties: None, resource_properties: query }
}

fn instances(amount: u32, vcpus: i64) -> Demand {
    Demand::Slots {
        amount,
        resources: BTreeMap::from([("VCPU".into(), vcpus), ("MEMORY_MB".into(), 256)]),
        affinity: None,
        resource_properties: None,
        traits: Default::default(),
    }
}

/// A lease of `demand` over a random window of 1 to 12 hours within 6
/// days of `base`, on the half hour, if it fits.
async fn book(store: &Store, rng: &mut StdRng, base: DateTime<Utc>, name: String, demand: Demand) {
    let start = base + Duration::minutes(30 * rng.gen_range(0..48 * 6));
    let end = start + Duration::hours(rng.gen_range(1..=12));
    let resource_type = if matches!(demand, Demand::Hosts { .. }) { "physical:host" } else { "virtual:instance" };
    let new = NewLease {
        name,
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(start), end: DateSpec::At(end), before_end: None },
        reservations: vec![NewReservation { resource_type: resource_type.into(), params: json!({}), demand }],
    };
    if let Err(e) = store.create_lease(&EventMeta::default(), new).await {
        assert_eq!(e.kind, berth_core::error::ErrorKind::Capacity, "{e:?}");
    }
}

fn demand(rng: &mut StdRng) -> Vec<Demand> {
    match rng.gen_range(0..6) {
        0 => vec![hosts(None, rng.gen_range(1..=4))],
        1 => vec![hosts(Some(rng.gen_range(0..3)), rng.gen_range(1..=3))],
        2 => vec![instances(rng.gen_range(1..=6), 4)],
        3 => vec![hosts(Some(0), 2), hosts(Some(1), 2)],
        // A property SQL does not narrow by: the hosts read free may all
        // lack it.
        4 => vec![with_gpus(rng.gen_range(1..=2))],
        _ => vec![hosts(None, 20)],
    }
}

#[tokio::test]
async fn advice_on_the_hosts_free_then_answers_as_every_host_does() {
    let db = TestDatabase::new().await;
    let store = db.store(4).with_cleaning_time(std::time::Duration::from_secs(30 * 60));
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    cloud(&store, base).await;
    let mut rng = StdRng::seed_from_u64(30);
    let (mut found, mut empty) = (0, 0);
    // Rounds of booking, each filling the calendar further, then probes.
    for round in 0..5 {
        for k in 0..60 {
            let d = if rng.gen_bool(0.7) { hosts(None, rng.gen_range(1..=3)) } else { instances(2, 8) };
            book(&store, &mut rng, base, format!("b{round}-{k}"), d).await;
        }
        for k in 0..12 {
            let demands = demand(&mut rng);
            let from = base + Duration::minutes(30 * rng.gen_range(0..48 * 5));
            let duration = Duration::hours(rng.gen_range(1..=8));
            let until = from + Duration::days(2);
            let limit = rng.gen_range(1..=6);
            let got = store.availability("p1", &demands, duration, from, until, limit).await.unwrap();
            let want = on_every_host(&store, &demands, duration, from, until, limit).await;
            assert_eq!(got, want, "round {round}, probe {k}: {demands:?} for {duration} from {from}");
            found += got.len();
            empty += usize::from(got.is_empty());
        }
    }
    assert!(found > 60, "windows found: {found}");
    assert!(empty > 0, "some asks find no window");
}

/// A start time whose window has no free host at all, over a calendar
/// full for a day: the first window offered is the first after it.
#[tokio::test]
async fn advice_skips_a_day_with_no_host_free() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let ids = cloud(&store, base).await;
    let mut rng = StdRng::seed_from_u64(7);
    // Every usable host busy for the first day, each until a different hour.
    for (k, _) in ids.iter().enumerate().filter(|(k, _)| ![5, 6, 7].contains(k)) {
        let new = NewLease {
            name: format!("full-{k}"),
            project_id: "p1".into(),
            user_id: "u".into(),
            dates: LeaseDates::One {
                start: DateSpec::At(base),
                end: DateSpec::At(base + Duration::hours(20 + rng.gen_range(0..8))),
                before_end: None,
            },
            reservations: vec![NewReservation {
                resource_type: "physical:host".into(),
                params: json!({}),
                demand: hosts(None, 1),
            }],
        };
        store.create_lease(&EventMeta::default(), new).await.unwrap();
    }
    for n in [1, 3, 20] {
        let demands = [hosts(None, n)];
        let until = base + Duration::days(3);
        let got = store.availability("p1", &demands, Duration::hours(2), base, until, 3).await.unwrap();
        let want = on_every_host(&store, &demands, Duration::hours(2), base, until, 3).await;
        assert_eq!(got, want, "{n} hosts");
        assert!(got.first().is_some_and(|a| a.start >= base + Duration::hours(20)), "{n} hosts: {got:?}");
    }
}
