//! The manager in process, on a real database, with its plugins' webhook
//! drivers pointed at a real HTTP receiver.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_core::dates::DateSpec;
use berth_core::event::Allocation;
use berth_core::lease::{LeaseEventType, FREE_POOL};
use berth_core::lease_event::{RECYCLE_POOL, SHARED_POOL};
use berth_core::{EventMeta, Inventory, Window};
use berth_manager::{Manager, ManagerConfig};
use berth_plugins::{PluginsConfig, Registry};
use berth_store::commands::{
    ConsumerAllocations, GenerationCheck, HostChange, LeaseDates, NewHost, NewLease, NewReservation,
};
use berth_store::queries::lease_events::{LeaseEventFilter, LeaseEventRow};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use berth_testkit::receiver;
use chrono::Utc;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use uuid::Uuid;

fn meta() -> EventMeta {
    EventMeta { actor: Some("test".into()), ..Default::default() }
}

fn test_config(id: &str) -> ManagerConfig {
    ManagerConfig {
        id: Some(id.into()),
        poll_interval_ms: 200,
        claim_ttl_ms: 1_500,
        retry_min_ms: 50,
        retry_max_ms: 200,
        max_attempts: 3,
        shutdown_grace_ms: 2_000,
        ..Default::default()
    }
}

/// Plugins acting through webhooks on the receiver; `instance` and `host`
/// are the query strings of the two built-in types' URLs.
fn registry(base: &str, instance: &str, host: &str, extra: Value) -> Arc<Registry> {
    let mut cfg = json!({
        "enabled": ["physical:host", "virtual:instance", "virtual:thing"],
        "drivers": {
            "virtual:instance": {"driver": "webhook", "url": format!("{base}/hook?{instance}"), "timeout_ms": 2000},
            "physical:host": {"driver": "webhook", "url": format!("{base}/hook?{host}"), "timeout_ms": 2000},
        },
        "external": {
            "virtual:thing": {"driver": "webhook", "url": format!("{base}/hook?validate=nothing"), "timeout_ms": 2000},
        },
    });
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    let cfg: PluginsConfig = serde_json::from_value(cfg).unwrap();
    Arc::new(cfg.registry(cfg.builtins().unwrap()).unwrap())
}

struct Running {
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.await.unwrap();
    }
}

fn start(store: &Store, registry: Arc<Registry>, cfg: ManagerConfig) -> Running {
    let (tx, rx) = oneshot::channel();
    let m = Manager::new(store.clone(), registry, cfg);
    let done = tokio::spawn(m.run(async move {
        let _ = rx.await;
    }));
    Running { stop: Some(tx), done }
}

async fn lease(
    store: &Store,
    registry: &Registry,
    name: &str,
    start: DateSpec,
    end: chrono::DateTime<Utc>,
    reservations: Vec<Value>,
) -> Uuid {
    let mut rs = Vec::new();
    for r in reservations {
        let rt = r["resource_type"].as_str().unwrap().to_string();
        let request = registry.get(&rt).unwrap().validate(&r).await.unwrap();
        rs.push(NewReservation {
            resource_type: rt,
            params: r.clone(),
            demand: berth_plugins::host::demand(&request).unwrap(),
        });
    }
    let new = NewLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "alice".into(),
        dates: LeaseDates::One { start, end: DateSpec::At(end), before_end: None },
        reservations: rs,
    };
    store.create_lease(&meta(), new).await.unwrap()[0].record.id
}

async fn events(store: &Store, lease: Uuid) -> Vec<LeaseEventRow> {
    store.lease_events(&LeaseEventFilter { lease_id: Some(lease), ..Default::default() }).await.unwrap()
}

async fn event(store: &Store, lease: Uuid, t: LeaseEventType) -> LeaseEventRow {
    events(store, lease).await.into_iter().find(|e| e.event_type == t.as_str()).unwrap()
}

/// Waits until the lease's event of type `t` has `status`.
async fn wait_event(store: &Store, lease: Uuid, t: LeaseEventType, status: &str, secs: u64) -> LeaseEventRow {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let e = event(store, lease, t).await;
        if e.status == status {
            return e;
        }
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {t:?} {status}: {e:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn enrol(store: &Store, name: &str) -> Uuid {
    store
        .enrol_host(
            &meta(),
            NewHost {
                name: name.into(),
                resources: Some((8, 16384, 100)),
                reservable: true,
                capabilities: BTreeMap::new(),
            },
        )
        .await
        .unwrap()
}

fn replay_clean(report: &berth_store::replay::ReplayReport) {
    assert!(report.is_clean(), "projections differ from the log: {:?}", report.differences);
}

#[tokio::test]
async fn a_lease_starting_now_wakes_its_instance_and_ends_by_deleting_it() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let (rx, base) = receiver::start().await;
    let reg = registry(&base, "", "", json!({}));
    enrol(&store, "h1").await;
    let m = start(&store, reg.clone(), test_config("m1"));
    let end = Utc::now() + chrono::Duration::seconds(3);
    let created = std::time::Instant::now();
    let id = lease(
        &store,
        &reg,
        "now",
        DateSpec::Now,
        end,
        vec![json!({"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 512,
                    "instance_ids": ["i-123"]})],
    )
    .await;
    rx.wait_for(10, "wake_up", |c| c.iter().any(|c| c.action == "wake_up")).await;
    let woken = created.elapsed();
    let start_event = wait_event(&store, id, LeaseEventType::StartLease, "DONE", 10).await;
    assert_eq!(start_event.attempts, 1);
    let l = store.lease(id, None).await.unwrap();
    assert_eq!(l.record.status.as_str(), "ACTIVE");
    assert_eq!(l.record.reservations[0].status.as_str(), "active");
    let wake = &rx.calls_of("wake_up")[0];
    assert_eq!(wake.payload["instance_id"], "i-123");
    let slot = &l.record.reservations[0].slots[0];
    assert_eq!(wake.key, format!("{}:{}:{}", start_event.id, l.record.reservations[0].id, slot.consumer));
    assert_eq!(wake.header_key.as_deref(), Some(wake.key.as_str()));
    println!("instance woken {woken:?} after the lease was created");
    wait_event(&store, id, LeaseEventType::EndLease, "DONE", 15).await;
    let l = store.lease(id, None).await.unwrap();
    assert_eq!(l.record.status.as_str(), "TERMINATED");
    assert_eq!(rx.calls_of("delete").len(), 1);
    assert_eq!(rx.calls_of("delete")[0].payload["instance_id"], "i-123");
    m.stop().await;
    replay_clean(&store.replay_verify().await.unwrap());
}

#[tokio::test]
async fn failures_are_retried_then_done_or_error() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let (_rx, base) = receiver::start().await;
    // The host plugin's calls fail twice per key, the instance plugin's always.
    let reg = registry(&base, "fail=always", "fail=2", json!({}));
    let reg_permanent = registry(&base, "fail=permanent", "", json!({}));
    enrol(&store, "h1").await;
    enrol(&store, "h2").await;
    let far = Utc::now() + chrono::Duration::hours(2);
    let flaky = lease(
        &store,
        &reg,
        "flaky",
        DateSpec::Now,
        far,
        vec![json!({"resource_type": "physical:host", "min": 1, "max": 1})],
    )
    .await;
    let broken = lease(
        &store,
        &reg,
        "broken",
        DateSpec::Now,
        far,
        vec![json!({"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 1})],
    )
    .await;
    let m = start(&store, reg, test_config("m1"));
    let e = wait_event(&store, flaky, LeaseEventType::StartLease, "DONE", 20).await;
    assert_eq!(e.attempts, 3);
    assert!(e.last_error.as_deref().unwrap_or_default().contains("busy"), "{e:?}");
    assert_eq!(store.lease(flaky, None).await.unwrap().record.status.as_str(), "ACTIVE");
    let e = wait_event(&store, broken, LeaseEventType::StartLease, "ERROR", 20).await;
    assert_eq!(e.attempts, 3);
    let err = e.last_error.unwrap();
    assert!(err.contains("compute is down") && err.contains("gave up after 3 attempts"), "{err}");
    assert_eq!(store.lease(broken, None).await.unwrap().record.status.as_str(), "ERROR");
    m.stop().await;

    // A permanent failure is not retried.
    let m = start(&store, reg_permanent.clone(), test_config("m2"));
    let refused = lease(
        &store,
        &reg_permanent,
        "refused",
        DateSpec::Now,
        far,
        vec![json!({"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 1})],
    )
    .await;
    let e = wait_event(&store, refused, LeaseEventType::StartLease, "ERROR", 20).await;
    assert_eq!(e.attempts, 1);
    assert!(e.last_error.unwrap().contains("no such instance"));
    m.stop().await;
    replay_clean(&store.replay_verify().await.unwrap());
}

#[tokio::test]
async fn an_expired_claim_is_taken_back_and_a_finished_event_never_is() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let (rx, base) = receiver::start().await;
    let reg = registry(&base, "", "", json!({}));
    let far = Utc::now() + chrono::Duration::hours(2);
    let id =
        lease(&store, &reg, "l", DateSpec::Now, far, vec![json!({"resource_type": "virtual:thing", "n": 1})]).await;
    // A manager that claims and then dies.
    let claims = store.claim_lease_events("dead", 10, chrono::Duration::milliseconds(500)).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].event_type, LeaseEventType::StartLease);
    assert_eq!(claims[0].attempt, 1);
    // Not yet expired: nobody else may take it.
    assert!(store.claim_lease_events("other", 10, chrono::Duration::seconds(5)).await.unwrap().is_empty());
    let m = start(&store, reg, test_config("alive"));
    let e = wait_event(&store, id, LeaseEventType::StartLease, "DONE", 10).await;
    assert_eq!((e.attempts, e.claimed_by.as_deref()), (2, Some("alive")));
    assert_eq!(rx.calls_of("on_start").len(), 1);
    m.stop().await;
    // The dead manager's late outcome is not recorded over the finished event.
    let late = store
        .finish_lease_events(
            "dead",
            &[berth_store::commands::Finish {
                lease: id,
                event: claims[0].event,
                attempt: 1,
                outcome: berth_store::commands::Outcome::Failed { error: "late".into() },
                hooks: vec![],
            }],
        )
        .await
        .unwrap();
    assert_eq!(late, vec![berth_store::commands::Recorded::ClaimLost]);
    assert_eq!(event(&store, id, LeaseEventType::StartLease).await.status, "DONE");
    replay_clean(&store.replay_verify().await.unwrap());
}

/// Another consumer on a host: an allocation of a class the lease's slot
/// does not hold (the lease took the host's whole inventory as it was).
async fn squat(store: &Store, host: Uuid) -> Uuid {
    store.create_resource_class(&meta(), "CUSTOM_SCRATCH", false).await.unwrap();
    let mut inv = store.inventories(host).await.unwrap();
    inv.insert("CUSTOM_SCRATCH".into(), Inventory { total: 10, ..Default::default() });
    store.replace_inventories(&meta(), host, None, inv).await.unwrap();
    let consumer = Uuid::new_v4();
    store
        .replace_allocations(
            &meta(),
            vec![ConsumerAllocations {
                consumer,
                project_id: "p9".into(),
                user_id: "mallory".into(),
                consumer_type: None,
                generation: GenerationCheck::New,
                allocations: vec![Allocation {
                    provider: host,
                    resource_class: "CUSTOM_SCRATCH".into(),
                    used: 1,
                    window: Window::from(Utc::now()),
                }],
            }],
        )
        .await
        .unwrap();
    consumer
}

#[tokio::test]
async fn hosts_go_back_by_each_end_policy() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let (rx, base) = receiver::start().await;
    let reg = registry(&base, "", "", json!({"host": {"recycle_grace_s": 2}}));
    let mut cfg = test_config("m1");
    cfg.poll_interval_ms = 100;
    let m = start(&store, reg.clone(), cfg);
    let mut results = Vec::new();
    for policy in ["release", "recycle", "shared"] {
        let host = enrol(&store, &format!("h-{policy}")).await;
        let end = Utc::now() + chrono::Duration::seconds(3);
        let id = lease(
            &store,
            &reg,
            policy,
            DateSpec::Now,
            end,
            vec![json!({"resource_type": "physical:host", "min": 1, "max": 1, "end_policy": policy,
                        "hypervisor_properties": format!("[\"=\", \"$hypervisor_hostname\", \"h-{policy}\"]")})],
        )
        .await;
        wait_event(&store, id, LeaseEventType::StartLease, "DONE", 10).await;
        let l = store.lease(id, None).await.unwrap();
        let pool = l.record.reservations[0].resource_id;
        assert_eq!(store.host_pools(host).await.unwrap(), vec![pool], "{policy}: in the lease's pool while it runs");
        let other = squat(&store, host).await;
        results.push((policy, host, id, pool, other));
    }
    for (policy, host, id, pool, other) in &results {
        wait_event(&store, *id, LeaseEventType::EndLease, "DONE", 15).await;
        let pools = store.host_pools(*host).await.unwrap();
        let h = store.host(*host).await.unwrap();
        match *policy {
            "release" => {
                assert_eq!(pools, vec![FREE_POOL]);
                assert!(h.reservable);
                assert!(store.consumer(*other).await.unwrap().is_none(), "the other consumer is deleted");
                let release: Vec<_> =
                    rx.calls_of("release").into_iter().filter(|c| c.payload["lease"]["id"] == json!(id)).collect();
                assert_eq!(release.len(), 1);
                assert_eq!(release[0].payload["hosts"][0]["other_consumers"][0]["consumer_id"], json!(other));
            }
            "recycle" => {
                assert_eq!(pools, vec![RECYCLE_POOL]);
                assert!(!h.reservable);
                assert!(store.consumer(*other).await.unwrap().is_some(), "recycle keeps the other consumer");
                assert_eq!(store.host_hold(*host).await.unwrap().unwrap().pool, RECYCLE_POOL);
            }
            "shared" => {
                assert_eq!(pools, vec![SHARED_POOL]);
                assert!(!h.reservable);
                assert!(store.consumer(*other).await.unwrap().is_some());
            }
            _ => unreachable!(),
        }
        assert!(!pools.contains(pool));
        assert_eq!(store.lease(*id, None).await.unwrap().record.status.as_str(), "TERMINATED");
    }
    // Recycle: after the grace period the host is released anyway.
    let (_, recycled, _, _, other) = results[1];
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while store.host_hold(recycled).await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "the recycled host never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.host_pools(recycled).await.unwrap(), vec![FREE_POOL]);
    assert!(store.host(recycled).await.unwrap().reservable);
    assert!(store.consumer(other).await.unwrap().is_none());
    // Shared: an admin makes it reservable again, and it is back in the free pool.
    let (_, shared, _, _, _) = results[2];
    store.update_host(&meta(), shared, HostChange { reservable: Some(true), ..Default::default() }).await.unwrap();
    assert_eq!(store.host_pools(shared).await.unwrap(), vec![FREE_POOL]);
    assert!(store.host_hold(shared).await.unwrap().is_none());
    m.stop().await;
    replay_clean(&store.replay_verify().await.unwrap());
}

#[tokio::test]
async fn back_to_back_leases_on_one_host_end_before_the_next_starts() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let (rx, base) = receiver::start().await;
    let reg = registry(&base, "", "", json!({}));
    let host = enrol(&store, "h1").await;
    let t = Utc::now() + chrono::Duration::seconds(2);
    let r = || vec![json!({"resource_type": "physical:host", "min": 1, "max": 1})];
    let first = lease(&store, &reg, "first", DateSpec::Now, t, r()).await;
    let second = lease(&store, &reg, "second", DateSpec::At(t), t + chrono::Duration::hours(1), r()).await;
    let m = start(&store, reg, test_config("m1"));
    wait_event(&store, second, LeaseEventType::StartLease, "DONE", 15).await;
    let end = event(&store, first, LeaseEventType::EndLease).await;
    assert_eq!(end.status, "DONE");
    let calls = rx.calls();
    let released = calls.iter().position(|c| c.action == "release").unwrap();
    let second_start =
        calls.iter().position(|c| c.action == "on_start" && c.payload["lease"]["id"] == json!(second)).unwrap();
    assert!(released < second_start, "the first lease's end ran before the second's start");
    let pool = store.lease(second, None).await.unwrap().record.reservations[0].resource_id;
    assert_eq!(store.host_pools(host).await.unwrap(), vec![pool]);
    m.stop().await;
    replay_clean(&store.replay_verify().await.unwrap());
}

#[tokio::test]
async fn deleting_a_running_host_lease_returns_its_hosts_to_the_free_pool() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let (_rx, base) = receiver::start().await;
    let reg = registry(&base, "", "", json!({}));
    let host = enrol(&store, "h1").await;
    let far = Utc::now() + chrono::Duration::hours(2);
    let id = lease(
        &store,
        &reg,
        "l",
        DateSpec::Now,
        far,
        vec![json!({"resource_type": "physical:host", "min": 1, "max": 1})],
    )
    .await;
    let m = start(&store, reg, test_config("m1"));
    wait_event(&store, id, LeaseEventType::StartLease, "DONE", 10).await;
    let pool = store.lease(id, None).await.unwrap().record.reservations[0].resource_id;
    assert_eq!(store.host_pools(host).await.unwrap(), vec![pool]);
    store.delete_lease(&meta(), id, None).await.unwrap();
    assert_eq!(store.host_pools(host).await.unwrap(), vec![FREE_POOL]);
    m.stop().await;
    replay_clean(&store.replay_verify().await.unwrap());
}
