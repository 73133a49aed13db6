//! A whole-host lease decided on the hosts near its window (`queries::near`)
//! takes a host as tight as best fit takes over every candidate: the
//! calendar stays as packed. Checked on a cloud booked at random, with
//! property queries, cleaning times (the default and hosts' own) and hosts
//! that may not be placed on (disabled, unreservable, kept for another
//! project), window after window, each then booked for real.

use std::collections::BTreeMap;

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::{EventMeta, Window};
use chrono::{DateTime, Duration, DurationRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use uuid::Uuid;

use super::heal::Demands;
use super::plan::{read_near, read_spans};
use crate::commands::{HostChange, LeaseDates, NewHost, NewLease, NewReservation};
use crate::queries::fit::{decide, gather_candidates, Gathered, Item, Plan};
use crate::queries::leases::Lease;
use crate::testing::TestDatabase;
use crate::Store;

pub(super) const HOSTS: usize = 40;
pub(super) const BOOKED: usize = 200;
pub(super) const PROBES: usize = 150;

/// A demand for hosts in zone "a": 32 hosts, more than the near read ranks
/// one by one (`named_hosts::FEW` in tests), so it walks the lists of
/// usable hosts' holds, and must cut the ranking and vouch for the cut.
pub(super) fn zone_demand(max: u32) -> Demand {
    let query = berth_core::query::parse("q", &json!(["==", "$zone", "a"])).unwrap();
    Demand::Hosts { min: 1, max, hypervisor_properties: None, resource_properties: query }
}

pub(super) fn hosts_demand(rack: Option<usize>, max: u32) -> Demand {
    let query = rack.map(|r| berth_core::query::parse("q", &json!(["==", "$rack", format!("r{r}")])).unwrap().unwrap());
    Demand::Hosts { min: 1, max, hypervisor_properties: None, resource_properties: query }
}

/// A demand only the big hosts meet, by a property SQL does not narrow by
/// (berth-core alone decides it): the near read ranks every listed host,
/// so the tightest it ranks may all be hosts this demand cannot use, and
/// its choice must then be vouched for by where the ranking was cut.
pub(super) fn big_demand(max: u32) -> Demand {
    let query = berth_core::query::parse("q", &json!([">=", "$memory_mb", 8192])).unwrap();
    Demand::Hosts { min: 1, max, hypervisor_properties: query, resource_properties: None }
}

/// Forty hosts in four racks; some with a cleaning time of their own, one
/// disabled, one unreservable, one kept for another project; the last
/// six with twice the memory.
pub(super) async fn cloud(store: &Store) -> Vec<Uuid> {
    let meta = EventMeta::default();
    let mut ids = Vec::new();
    for i in 0..HOSTS {
        let mut capabilities = BTreeMap::from([("rack".to_string(), Value::from(format!("r{}", i % 4)))]);
        if i < 32 {
            capabilities.insert("zone".into(), json!("a"));
        }
        match i {
            5 => capabilities.insert("cleaning_time".into(), json!(0)),
            6 => capabilities.insert("cleaning_time".into(), json!("120")),
            7 => capabilities.insert("authorized_projects".into(), json!("other")),
            _ => None,
        };
        let memory = if i >= HOSTS - 6 { 8192 } else { 4096 };
        let new =
            NewHost { name: format!("h{i:02}"), resources: Some((64, memory, 100)), reservable: i != 9, capabilities };
        ids.push(store.enrol_host(&meta, new).await.unwrap());
    }
    store.set_host_disabled(&meta, ids[8], true, None, &Demands::new()).await.unwrap();
    ids
}

/// A random window of 1 to 12 hours starting within 20 days of `base`, on the half hour.
pub(super) fn window(rng: &mut StdRng, base: DateTime<Utc>) -> Window {
    let start = base + Duration::minutes(30 * rng.gen_range(0..48 * 20));
    Window { start, end: Some(start + Duration::hours(rng.gen_range(1..=12))) }
}

pub(super) async fn book(store: &Store, name: String, w: Window, demand: Demand) {
    let new = NewLease {
        name,
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(w.start), end: DateSpec::At(w.end.unwrap()), before_end: None },
        reservations: vec![NewReservation { resource_type: "physical:host".into(), params: json!({}), demand }],
    };
    if let Err(e) = store.create_lease(&EventMeta::default(), new).await {
        assert_eq!(e.kind, berth_core::error::ErrorKind::Capacity, "{e:?}");
    }
}

/// The gaps around `w` of the hosts `plan` took, tightest first.
pub(super) fn gaps(g: &Gathered, plan: &Plan, w: &Window) -> Vec<Duration> {
    let mut out: Vec<Duration> = plan[0][0].iter().map(|p| g.candidates[g.index[&p.provider]].gap(w)).collect();
    out.sort();
    out
}

#[tokio::test]
async fn hosts_near_the_window_pack_the_calendar_as_every_host_does() {
    let (used, same_host) = probe_against_every_host(30, Read::Near).await;
    assert!(used >= PROBES * 3 / 4, "decided on the hosts near the window {used} times of {PROBES}");
    assert!(same_host >= used * 9 / 10, "the same hosts {same_host} times of {used}");
}

/// Which read a probe decides on.
pub(super) enum Read {
    /// The lists near the window (`read_near`).
    Near,
    /// The hosts' free spans (`read_spans`).
    Spans,
}

/// Books the cloud at random, then [`PROBES`] random demands (`seed`),
/// each decided on `read` and on every host, then booked: a choice on the
/// read is as tight as over every host, and never a host the lease may
/// not use. How many probes the read decided, and on the same hosts.
pub(super) async fn probe_against_every_host(seed: u64, read: Read) -> (usize, usize) {
    let db = TestDatabase::new().await;
    let cleaning = Duration::minutes(30);
    let store = db.store(4).with_cleaning_time(cleaning.to_std().unwrap());
    let ids = cloud(&store).await;
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    // Leases on hosts picked at random first, so that tight hosts are
    // everywhere, not only where best fit packed them.
    for k in 0..BOOKED {
        let on = ids[rng.gen_range(10..HOSTS)];
        let w = window(&mut rng, base);
        let _ = try_create(&store, &format!("b{k}"), w, one(None), Some(on)).await;
    }
    let (mut used, mut same_host) = (0, 0);
    for k in 0..PROBES {
        let w = window(&mut rng, base);
        let rack = rng.gen_bool(0.3).then(|| rng.gen_range(0..4));
        let max = if rng.gen_bool(0.2) { 3 } else { 1 };
        let demand = match rng.gen_range(0..10) {
            0..3 => zone_demand(max),
            3..5 => big_demand(max),
            _ => hosts_demand(rack, max),
        };
        let items = [Item::Place(&demand, Vec::new())];
        let draw = rng.gen_bool(0.5).then(|| rng.gen());
        let c = store.client().await.unwrap();
        let read = match read {
            Read::Near => read_near(&c, "p1", &items, &[w], cleaning, draw).await.unwrap(),
            Read::Spans => read_spans(&c, "p1", &items, &[w], cleaning, draw).await.unwrap(),
        };
        let mut full = gather_candidates(&c, "p1", &items, w, w, cleaning).await.unwrap();
        full.draw = draw;
        drop(c);
        let by_all = decide(&mut full.clone(), "p1", &items, &[w]);
        if let Some(g) = read {
            used += 1;
            let by_read = decide(&mut g.clone(), "p1", &items, &[w]);
            match (&by_read, &by_all) {
                (Ok(n), Ok(a)) => {
                    assert_eq!(gaps(&g, n, &w), gaps(&full, a, &w), "probe {k} over {w:?}: as tight as every host");
                    for p in &n[0][0] {
                        assert!(![ids[7], ids[8], ids[9]].contains(&p.provider), "probe {k}: a host it may not use");
                    }
                    same_host += usize::from(n == a);
                }
                (Err(_), Err(_)) => {}
                _ => panic!("probe {k} over {w:?}: read {:?}, every host {:?}", by_read.is_ok(), by_all.is_ok()),
            }
        }
        book(&store, format!("l{k}"), w, demand).await;
    }
    (used, same_host)
}

/// A recurring lease's occurrences, ranked around the first: decided on
/// the hosts near the first window, each occurrence takes hosts as tight
/// around it as over every host, and hosts free over its own window.
#[tokio::test]
async fn a_series_near_its_first_window_packs_as_every_host_does() {
    let db = TestDatabase::new().await;
    let cleaning = Duration::minutes(30);
    let store = db.store(4).with_cleaning_time(cleaning.to_std().unwrap());
    let ids = cloud(&store).await;
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let mut rng = StdRng::seed_from_u64(31);
    for k in 0..BOOKED {
        let on = ids[rng.gen_range(10..HOSTS)];
        let w = window(&mut rng, base);
        let _ = try_create(&store, &format!("b{k}"), w, one(None), Some(on)).await;
    }
    let (mut near_used, mut probes) = (0, 0);
    for k in 0..60 {
        let first = window(&mut rng, base);
        let every = Duration::hours(rng.gen_range(13..=72));
        let windows: Vec<Window> = (0..rng.gen_range(2..=6))
            .map(|n| Window { start: first.start + every * n, end: first.end.map(|e| e + every * n) })
            .collect();
        let rack = rng.gen_bool(0.3).then(|| rng.gen_range(0..4));
        let max = if rng.gen_bool(0.2) { 2 } else { 1 };
        let demand = match rng.gen_range(0..10) {
            0..3 => zone_demand(max),
            3..5 => big_demand(max),
            _ => hosts_demand(rack, max),
        };
        let items = [Item::Place(&demand, Vec::new())];
        let draw = rng.gen_bool(0.5).then(|| rng.gen());
        let span = Window { start: windows[0].start, end: windows[windows.len() - 1].end };
        let c = store.client().await.unwrap();
        let near = read_near(&c, "p1", &items, &windows, cleaning, draw).await.unwrap();
        let mut full = gather_candidates(&c, "p1", &items, span, windows[0], cleaning).await.unwrap();
        full.draw = draw;
        drop(c);
        probes += 1;
        let by_all = decide(&mut full.clone(), "p1", &items, &windows);
        let Some(g) = near else {
            continue;
        };
        near_used += 1;
        let by_near = decide(&mut g.clone(), "p1", &items, &windows);
        let (Ok(n), Ok(a)) = (&by_near, &by_all) else {
            assert!(by_near.is_err() && by_all.is_err(), "probe {k}: near {:?}", by_near.is_ok());
            continue;
        };
        for (j, w) in windows.iter().enumerate() {
            let gaps = |g: &Gathered, plan: &Plan| {
                let mut out: Vec<Duration> =
                    plan[j][0].iter().map(|p| g.candidates[g.index[&p.provider]].gap(&windows[0])).collect();
                out.sort();
                out
            };
            assert_eq!(gaps(&g, n), gaps(&full, a), "probe {k}, occurrence {j}: as tight as over every host");
            for p in &n[j][0] {
                assert!(full.candidates[full.index[&p.provider]].is_free(w), "probe {k}, occurrence {j}: free");
            }
        }
    }
    assert!(near_used >= probes / 2, "decided near the first window {near_used} times of {probes}");
}

/// The near read plans its statements its own way and puts back, for the
/// rest of the transaction, whatever the planner was set to before.
/// The near read ranks the listed hosts by their gap in SQL and reads only
/// the tightest few; when they are all hosts the demand cannot use (by a
/// property only berth-core decides), the choice among the rest read must
/// not be vouched for past where the ranking was cut. Thirty small hosts
/// tied tightest around the window, a loose big host first by name (so
/// among the other hosts read), a tighter big host last.
#[tokio::test]
async fn a_ranking_cut_short_vouches_for_nothing_beyond_it() {
    let db = TestDatabase::new().await;
    let store = db.store(4).with_cleaning_time(std::time::Duration::ZERO);
    let meta = EventMeta::default();
    let host = |name: String, memory: i64| {
        let store = &store;
        let meta = &meta;
        async move {
            let new = NewHost {
                name,
                resources: Some((64, memory, 100)),
                reservable: true,
                capabilities: Default::default(),
            };
            store.enrol_host(meta, new).await.unwrap()
        }
    };
    let loose = host("a-big".into(), 8192).await;
    let mut small = Vec::new();
    for i in 0..30 {
        small.push(host(format!("s{i:02}"), 4096).await);
    }
    let tight = host("z-big".into(), 8192).await;
    let t = (store.now().await.unwrap() + Duration::days(30)).duration_trunc(Duration::hours(1)).unwrap();
    let two_hours = |start: DateTime<Utc>| Window { start, end: Some(start + Duration::hours(2)) };
    for (k, &h) in small.iter().enumerate() {
        create(&store, &format!("b{k}"), two_hours(t - Duration::hours(3)), one(None), Some(h)).await;
        create(&store, &format!("a{k}"), two_hours(t + Duration::hours(3)), one(None), Some(h)).await;
    }
    for (name, h, days) in [("loose", loose, 20), ("tight", tight, 2)] {
        create(&store, &format!("{name}-b"), two_hours(t - Duration::days(days)), one(None), Some(h)).await;
        create(&store, &format!("{name}-a"), two_hours(t + Duration::days(days)), one(None), Some(h)).await;
    }
    let w = two_hours(t);
    let demand = big_demand(1);
    let items = [Item::Place(&demand, Vec::new())];
    let c = store.client().await.unwrap();
    let near = read_near(&c, "p1", &items, &[w], Duration::zero(), None).await.unwrap();
    let mut full = gather_candidates(&c, "p1", &items, w, w, Duration::zero()).await.unwrap();
    let Ok(by_all) = decide(&mut full, "p1", &items, &[w]) else { panic!("no big host over every host") };
    assert_eq!(by_all[0][0][0].provider, tight, "best fit over every host");
    let g = near.expect("the near read vouches at a deeper depth");
    let Ok(by_near) = decide(&mut g.clone(), "p1", &items, &[w]) else { panic!("no big host near") };
    assert_eq!(by_near[0][0][0].provider, tight, "the near read took the loose big host");
}

#[tokio::test]
async fn the_near_read_puts_the_planners_settings_back() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    cloud(&store).await;
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let w = Window { start: base, end: Some(base + Duration::hours(2)) };
    let mut c = store.client().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let names = ["plan_cache_mode", "enable_sort", "enable_seqscan", "enable_hashjoin", "jit", "enable_bitmapscan"];
    let settings = format!(
        "SELECT {}",
        names.iter().map(|n| format!("current_setting('{n}') AS {n}")).collect::<Vec<_>>().join(", ")
    );
    let settings = settings.as_str();
    tx.execute(
        "SELECT set_config('enable_sort', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)",
        &[],
    )
    .await
    .unwrap();
    let before = tx.query_one(settings, &[]).await.unwrap();
    // Both reads: the lists, and the hosts a property names ranked.
    let (plain, rack, windows) = (hosts_demand(None, 1), hosts_demand(Some(1), 1), [w]);
    let found = crate::queries::near::read(
        &tx,
        "p1",
        &plain,
        &windows,
        Duration::zero(),
        None,
        crate::queries::near::Depth { rows: 1, ranked: 1 },
    )
    .await
    .unwrap();
    assert!(found.is_some_and(|n| !n.ids.is_empty()), "hosts read");
    let ranked = crate::queries::named_hosts::read(&tx, "p1", &rack, &windows, Duration::zero(), 1).await.unwrap();
    assert!(ranked.is_some_and(|n| !n.ids.is_empty()), "hosts ranked");
    let after = tx.query_one(settings, &[]).await.unwrap();
    for n in names {
        assert_eq!(before.get::<_, String>(n), after.get::<_, String>(n), "setting {n}");
    }
    assert_eq!(after.get::<_, String>("plan_cache_mode"), "force_generic_plan");
    assert_eq!(after.get::<_, String>("enable_seqscan"), "on");
}

/// A host the near read must see change at once: each change is made
/// between two creations at the same window, and the second must see it.
#[tokio::test]
async fn the_next_creation_sees_a_host_disabled_changed_shrunk_or_freed() {
    let db = TestDatabase::new().await;
    sees_changes(&db.store(4).with_small_cloud(0)).await;
}

/// The same, on a cloud small enough to be read whole.
#[tokio::test]
async fn the_next_creation_on_a_small_cloud_sees_the_same_changes() {
    let db = TestDatabase::new().await;
    sees_changes(&db.store(4)).await;
}

/// A cloud is read whole while small, near once it has grown past small
/// (each creation counts the hosts for the next).
#[tokio::test]
async fn a_cloud_grown_past_small_is_read_near_again() {
    let db = TestDatabase::new().await;
    let store = db.store(4).with_small_cloud(HOSTS);
    cloud(&store).await;
    assert!(!store.small_cloud.is_small(), "not small before a count");
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let w = Window { start: base, end: Some(base + Duration::hours(2)) };
    create(&store, "first", w, one(None), None).await;
    assert!(store.small_cloud.is_small(), "{HOSTS} hosts");
    let new = NewHost {
        name: "h40".into(),
        resources: Some((64, 4096, 100)),
        reservable: true,
        capabilities: BTreeMap::new(),
    };
    store.enrol_host(&EventMeta::default(), new).await.unwrap();
    create(&store, "second", w, one(None), None).await;
    assert!(!store.small_cloud.is_small(), "one host more");
}

async fn sees_changes(store: &Store) {
    let meta = EventMeta::default();
    let ids = cloud(store).await;
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let w = Window { start: base + Duration::hours(10), end: Some(base + Duration::hours(12)) };
    // A lease ending as the window starts makes h12 the tightest host.
    let before = Window { start: base + Duration::hours(8), end: Some(w.start) };
    let on = |lease: &Lease| lease.record.reservations[0].slots[0].provider;
    let tight = create(store, "before", before, one(Some(0)), Some(ids[12])).await;
    assert_eq!(on(&tight), ids[12]);
    let first = create(store, "first", w, one(None), None).await;
    assert_eq!(on(&first), ids[12], "the tightest host");
    store.delete_lease(&meta, first.record.id, None).await.unwrap();
    // Disabled: the next creation passes it over.
    store.set_host_disabled(&meta, ids[12], true, None, &Demands::new()).await.unwrap();
    let second = create(store, "second", w, one(None), None).await;
    assert_ne!(on(&second), ids[12], "a disabled host");
    store.delete_lease(&meta, second.record.id, None).await.unwrap();
    store.set_host_disabled(&meta, ids[12], false, None, &Demands::new()).await.unwrap();
    // Its rack changed: a creation asking for its old rack passes it over,
    // one asking for the new one takes it.
    let change = HostChange { capabilities: BTreeMap::from([("rack".into(), json!("r1"))]), ..Default::default() };
    store.update_host(&meta, ids[12], change).await.unwrap();
    let third = create(store, "third", w, one(Some(0)), None).await;
    assert_ne!(on(&third), ids[12], "a host no longer in the rack asked for");
    let fourth = create(store, "fourth", w, one(Some(1)), None).await;
    assert_eq!(on(&fourth), ids[12], "a host now in the rack asked for");
    // Shrunk: the next creation takes it whole as it is now.
    store.delete_lease(&meta, fourth.record.id, None).await.unwrap();
    let inventory = |total| berth_core::Inventory { total, ..Default::default() };
    let smaller = [("VCPU", 32), ("MEMORY_MB", 4096), ("DISK_GB", 100)];
    let smaller: BTreeMap<String, _> = smaller.into_iter().map(|(c, t)| (c.to_string(), inventory(t))).collect();
    store.replace_inventories(&meta, ids[12], None, smaller).await.unwrap();
    let fifth = create(store, "fifth", w, one(None), None).await;
    assert_eq!(on(&fifth), ids[12]);
    let whole = &fifth.record.reservations[0].slots[0].resources;
    assert_eq!(whole.get("VCPU"), Some(&32), "the host as it is now: {whole:?}");
    // Freed: a lease over the window deleted, the next creation takes its host.
    let sixth = create(store, "sixth", w, one(Some(1)), None).await;
    assert_ne!(on(&sixth), ids[12]);
    store.delete_lease(&meta, fifth.record.id, None).await.unwrap();
    let seventh = create(store, "seventh", w, one(None), None).await;
    assert_eq!(on(&seventh), ids[12], "the tightest host, freed");
}

pub(super) fn one(rack: Option<usize>) -> NewReservation {
    NewReservation { resource_type: "physical:host".into(), params: json!({}), demand: hosts_demand(rack, 1) }
}

/// Creates a one-reservation lease of "p1" over `w`; with `on`, asks for
/// that host by name.
async fn create(store: &Store, name: &str, w: Window, r: NewReservation, on: Option<Uuid>) -> Lease {
    try_create(store, name, w, r, on).await.unwrap()
}

pub(super) async fn try_create(
    store: &Store,
    name: &str,
    w: Window,
    mut r: NewReservation,
    on: Option<Uuid>,
) -> Result<Lease, berth_core::Error> {
    if let (Some(on), Demand::Hosts { hypervisor_properties, .. }) = (on, &mut r.demand) {
        let name = store.provider(on).await.unwrap().name;
        *hypervisor_properties = berth_core::query::parse("q", &json!(["==", "$name", name])).unwrap();
    }
    let new = NewLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "u".into(),
        dates: LeaseDates::One { start: DateSpec::At(w.start), end: DateSpec::At(w.end.unwrap()), before_end: None },
        reservations: vec![r],
    };
    Ok(store.create_lease(&EventMeta::default(), new).await?.remove(0))
}
