//! Many lease events due at once, more than the hook slots: the manager
//! claims the next batch while the last one's leases are read, and a
//! starved manager claims again as slots come back. Each event still fires
//! once, and the log replays to the same rows. And an event due too far
//! ahead to be announced still fires on time.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use berth_core::dates::DateSpec;
use berth_core::lease::{Demand, LeaseEventStatus, LeaseEventType};
use berth_core::EventMeta;
use berth_manager::{Manager, ManagerConfig};
use berth_plugins::{Hook, HookError, HookOutcome, Registry, ResourcePlugin, ResourceRequest};
use berth_store::commands::{LeaseDates, NewLease, NewReservation};
use berth_store::notify::{Notification, LEASE_EVENTS};
use berth_store::queries::lease_events::LeaseEventFilter;
use berth_store::testing::TestDatabase;
use chrono::Utc;

/// Counts the start hooks by idempotency key; each takes a little while,
/// so that hook slots run out.
#[derive(Default)]
struct Counting {
    starts: Mutex<HashMap<String, usize>>,
    /// When each start hook began, on the database's clock's machine.
    began: Mutex<Vec<chrono::DateTime<Utc>>>,
}

#[async_trait]
impl ResourcePlugin for Counting {
    fn resource_type(&self) -> &str {
        "test:counting"
    }
    async fn validate(&self, _: &serde_json::Value) -> Result<ResourceRequest, berth_core::Error> {
        Ok(ResourceRequest::Nothing)
    }
    async fn on_start(&self, hook: &Hook) -> Result<HookOutcome, HookError> {
        *self.starts.lock().unwrap().entry(hook.idempotency_key.clone()).or_default() += 1;
        self.began.lock().unwrap().push(Utc::now());
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(HookOutcome { detail: serde_json::Value::Null, effects: Vec::new() })
    }
    async fn before_end(&self, _: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome { detail: serde_json::Value::Null, effects: Vec::new() })
    }
    async fn on_end(&self, _: &Hook) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome { detail: serde_json::Value::Null, effects: Vec::new() })
    }
}

#[tokio::test]
async fn more_due_events_than_hook_slots_each_fire_once() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let plugin = Arc::new(Counting::default());
    let mut registry = Registry::new();
    registry.register(plugin.clone());
    let n = 60;
    book_now(&store, n, chrono::Duration::hours(1)).await;
    // Batches of 4 with 8 slots: full batches claimed back to back, and
    // the manager starved again and again.
    let cfg = ManagerConfig {
        id: Some("m1".into()),
        poll_interval_ms: 60_000,
        batch_size: 4,
        max_in_flight: 8,
        ..Default::default()
    };
    let (stop, running) = start(&store, Arc::new(registry), cfg);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Not the poll (a minute): slots coming back and outcomes recorded wake it.
    let started_done = LeaseEventFilter {
        status: Some(LeaseEventStatus::Done),
        event_type: Some(LeaseEventType::StartLease),
        ..Default::default()
    };
    while store.lease_events(&started_done).await.unwrap().len() < n {
        assert!(std::time::Instant::now() < deadline, "{:?}", store.lease_event_counts().await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    running.await.unwrap();
    let starts = plugin.starts.lock().unwrap().clone();
    assert_eq!(starts.len(), n);
    assert!(starts.values().all(|c| *c == 1), "a start hook ran twice: {starts:?}");
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
}

/// Runs a manager until the sender is used or dropped.
fn start(
    store: &berth_store::Store,
    registry: Arc<Registry>,
    cfg: ManagerConfig,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(Manager::new(store.clone(), registry, cfg).run(async move {
        let _ = stopped.await;
    }));
    (stop, running)
}

/// Books `n` leases of the counting type starting now, each `length` long.
async fn book_now(store: &berth_store::Store, n: usize, length: chrono::Duration) {
    for i in 0..n {
        book(store, &format!("lease-{i}"), DateSpec::Now, Utc::now() + length).await;
    }
}

/// Books one lease of the counting type from `start` to `end`.
async fn book(store: &berth_store::Store, name: &str, start: DateSpec, end: chrono::DateTime<Utc>) {
    let meta = EventMeta { actor: Some("test".into()), ..Default::default() };
    let new = NewLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "alice".into(),
        dates: LeaseDates::One { start, end: DateSpec::At(end), before_end: None },
        reservations: vec![NewReservation {
            resource_type: "test:counting".into(),
            params: serde_json::json!({}),
            demand: Demand::Nothing,
        }],
    };
    store.create_lease(&meta, new).await.unwrap();
}

/// Two managers on one database, a burst many batches long: claims race
/// (each skips the other's rows), outcomes are recorded by two lanes each,
/// after the claims are made. Every event ends DONE with exactly one
/// outcome in the log; a hook that ran twice did so only because its claim
/// was taken back (a rescue, in the log), never because of a double claim.
#[tokio::test]
async fn a_burst_raced_by_two_managers_is_recorded_once_per_event() {
    let db = TestDatabase::new().await;
    let store = db.store(16);
    let plugin = Arc::new(Counting::default());
    let mut registry = Registry::new();
    registry.register(plugin.clone());
    let registry = Arc::new(registry);
    let n = 300;
    book_now(&store, n, chrono::Duration::hours(1)).await;
    let mut stops = Vec::new();
    let mut runs = Vec::new();
    // Two lanes, and five (more than a 2-core machine sizes): a burst
    // claimed and recorded on many lanes at once.
    for (id, lanes) in [("m1", 2), ("m2", 5)] {
        let cfg = ManagerConfig {
            id: Some(id.into()),
            poll_interval_ms: 60_000,
            batch_size: 16,
            max_in_flight: 64,
            claim_lanes: Some(lanes),
            ..Default::default()
        };
        let (stop, running) = start(&store, registry.clone(), cfg);
        stops.push(stop);
        runs.push(running);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let started_done = LeaseEventFilter {
        status: Some(LeaseEventStatus::Done),
        event_type: Some(LeaseEventType::StartLease),
        ..Default::default()
    };
    while store.lease_events(&started_done).await.unwrap().len() < n {
        assert!(std::time::Instant::now() < deadline, "{:?}", store.lease_event_counts().await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for stop in stops {
        let _ = stop.send(());
    }
    for run in runs {
        run.await.unwrap();
    }
    let started = store.lease_events(&started_done).await.unwrap();
    assert_eq!(started.len(), n);
    // A log reader holds back events while an older transaction may still
    // commit before them (so a cursor never skips one): read the log again
    // until it has caught up with what the projection shows.
    let (finished, rescued) = loop {
        let log = store.read_log(berth_store::log::Cursor::START, 100_000).await.unwrap();
        let (mut finished, mut rescued) = (HashMap::new(), HashMap::new());
        for e in &log {
            match e.event().unwrap() {
                berth_core::Event::LeaseEventFinished { event, .. } => *finished.entry(event).or_insert(0) += 1,
                berth_core::Event::LeaseEventClaimed { event, rescued_from: Some(_), .. } => {
                    *rescued.entry(event.to_string()).or_insert(0) += 1;
                }
                _ => {}
            }
        }
        if started.iter().all(|e| finished.contains_key(&e.id)) || std::time::Instant::now() >= deadline {
            break (finished, rescued);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(finished.values().all(|c| *c == 1), "an outcome recorded twice: {finished:?}");
    assert!(started.iter().all(|e| finished.contains_key(&e.id)), "every start recorded");
    let starts = plugin.starts.lock().unwrap().clone();
    assert_eq!(starts.len(), n);
    for (key, runs) in &starts {
        let event = key.split(':').next().unwrap();
        assert_eq!(*runs, 1 + rescued.get(event).copied().unwrap_or(0), "{key} ran {runs} times");
    }
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
}

/// A recorded outcome wakes the manager (not its poll, a minute away) when
/// it lets an event run that is already due: here each lease's before-end,
/// due with its start (the lease is shorter than an hour), waits for the
/// start to be recorded.
#[tokio::test]
async fn an_outcome_recorded_wakes_the_manager_for_the_events_it_let_run() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let plugin = Arc::new(Counting::default());
    let mut registry = Registry::new();
    registry.register(plugin.clone());
    let n = 5;
    book_now(&store, n, chrono::Duration::seconds(2)).await;
    let cfg = ManagerConfig { id: Some("m1".into()), poll_interval_ms: 60_000, ..Default::default() };
    let (stop, running) = start(&store, Arc::new(registry), cfg);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ended = LeaseEventFilter {
        status: Some(LeaseEventStatus::Done),
        event_type: Some(LeaseEventType::EndLease),
        ..Default::default()
    };
    while store.lease_events(&ended).await.unwrap().len() < n {
        assert!(std::time::Instant::now() < deadline, "{:?}", store.lease_event_counts().await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    running.await.unwrap();
    let counts = store.lease_event_counts().await.unwrap();
    assert_eq!(counts.get("DONE").copied(), Some(3 * n as i64), "{counts:?}");
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
}

/// A lease event due past the manager's wake horizon (twice its poll
/// interval and a second) notifies nobody: the manager finds it on a poll,
/// learns its due time there, and starts it on time, within a poll
/// interval of it at worst.
#[tokio::test]
async fn an_event_due_past_the_wake_horizon_fires_on_time_unannounced() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let plugin = Arc::new(Counting::default());
    let mut registry = Registry::new();
    registry.register(plugin.clone());
    let mut notes = store.listen(LEASE_EVENTS);
    assert_eq!(notes.recv().await, Some(Notification::Connected));
    let cfg = ManagerConfig { id: Some("m1".into()), poll_interval_ms: 1_000, ..Default::default() };
    let poll = cfg.poll_interval();
    let (stop, running) = start(&store, Arc::new(registry), cfg);
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let said: Option<f64> =
            c.query_one("SELECT extract(epoch FROM horizon)::float8 FROM manager_wake", &[]).await.unwrap().get(0);
        if let Some(said) = said {
            assert_eq!(said, 3.0, "twice the poll interval and a second");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the manager never said its horizon");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let due = store.now().await.unwrap() + chrono::Duration::seconds(5);
    book(&store, "later", DateSpec::At(due), due + chrono::Duration::hours(1)).await;
    let started_done = LeaseEventFilter {
        status: Some(LeaseEventStatus::Done),
        event_type: Some(LeaseEventType::StartLease),
        ..Default::default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while store.lease_events(&started_done).await.unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "{:?}", store.lease_event_counts().await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    running.await.unwrap();
    assert_eq!(notes.try_recv().ok(), None, "five seconds ahead is past the horizon: nothing to announce");
    let began = plugin.began.lock().unwrap().clone();
    assert_eq!(began.len(), 1);
    let late = (began[0] - due).to_std().unwrap_or_default();
    assert!(began[0] >= due && late < poll, "started {late:?} after its due time ({})", began[0] - due);
}
