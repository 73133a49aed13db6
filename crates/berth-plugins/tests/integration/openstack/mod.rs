//! The `openstack` driver against a Keystone and a Nova served here, on a
//! loopback port. Nova's side follows its API reference for the calls the
//! driver makes: host aggregates (list, create, `add_host`, `remove_host`,
//! `set_metadata`, delete) and servers (show, `unshelve`, `os-start`,
//! `shelve`, delete), with their error answers (409 for a host already in an
//! aggregate or a server not in a state for the action, 404 for what does
//! not exist, 400 for deleting an aggregate with hosts in it). Keystone's
//! side issues a token whose catalog names that Nova: the real Keystone of
//! `make test` has no compute service in its catalog.

mod cloud;

use std::sync::{Arc, Mutex};

use berth_plugins::driver::{Driver, DriverConfig};
use berth_plugins::{Hook, PluginsConfig};
use serde_json::{json, Value};

use cloud::{keystone, nova, Aggregate, Cloud, Shared};

struct Fixture {
    cloud: Shared,
    driver: Arc<dyn Driver>,
    /// The driver's `[plugins.drivers."…"]` settings.
    config: Value,
}

impl Fixture {
    async fn start(free_pool: bool) -> Fixture {
        let cloud: Shared = Arc::new(Mutex::new(Cloud::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        {
            let mut c = cloud.lock().unwrap();
            c.base = base.clone();
            c.compute_hosts = vec!["compute-1".into(), "compute-2".into(), "compute-3".into()];
            if free_pool {
                c.next_id = 1;
                let hosts = c.compute_hosts.clone();
                c.aggregates.insert(1, Aggregate { name: "freepool".into(), hosts, ..Default::default() });
            }
        }
        let app = axum::Router::new()
            .route("/identity/v3/auth/tokens", axum::routing::post(keystone))
            .fallback(nova)
            .with_state(cloud.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let mut config = json!({
            "driver": "openstack",
            "auth_url": format!("{base}/identity/v3"),
            "username": "berth", "password": "secret", "project_name": "service",
            "retries": 3, "retry_min_ms": 5,
        });
        if free_pool {
            config["free_pool"] = json!("freepool");
        }
        let driver = serde_json::from_value::<DriverConfig>(config.clone()).unwrap().build().unwrap();
        assert_eq!(driver.kind(), "openstack");
        Fixture { cloud, driver, config }
    }

    fn hosts_of(&self, name: &str) -> Option<Vec<String>> {
        self.cloud.lock().unwrap().aggregates.values().find(|a| a.name == name).map(|a| a.hosts.clone())
    }

    /// The Nova requests that changed something (a 2xx to anything but GET).
    fn changes(&self) -> Vec<(String, String)> {
        let c = self.cloud.lock().unwrap();
        c.log
            .iter()
            .filter(|(m, _, s)| m != "GET" && (200..300).contains(s))
            .map(|(m, p, _)| (m.clone(), p.clone()))
            .collect()
    }

    fn status(&self, server: &str) -> Option<String> {
        self.cloud.lock().unwrap().servers.get(server).cloned()
    }
}

const POOL: &str = "5f0c1a52-4b8e-4d7a-9b55-0d7d1c2e3f40";
const RESERVATION: &str = "8a1d4c33-9f20-4a55-b1e6-6a0f2c9d7e11";

fn host_payload(event_type: &str, others: Value) -> Value {
    json!({
        "resource_type": "physical:host",
        "event_type": event_type,
        "lease": {"id": "l-1", "name": "workshop", "project_id": "demo"},
        "reservation": {"id": RESERVATION, "resource_type": "physical:host", "resource_id": POOL},
        "pool": POOL,
        "hosts": [
            {"resource_provider": {"uuid": "00000000-0000-0000-0000-000000000001", "name": "compute-1"}, "other_consumers": others},
            {"resource_provider": {"uuid": "00000000-0000-0000-0000-000000000002", "name": "compute-2"}, "other_consumers": []},
        ],
    })
}

#[tokio::test]
async fn a_host_lease_moves_hosts_through_its_aggregate_once() {
    let f = Fixture::start(true).await;
    let start = host_payload("start_lease", json!([]));
    let answer = f.driver.call("on_start", &start, "start-key").await.unwrap();
    assert_eq!(answer, json!({"aggregate": POOL, "hosts": ["compute-1", "compute-2"]}));
    assert_eq!(f.hosts_of(POOL).unwrap(), ["compute-1", "compute-2"]);
    assert_eq!(f.hosts_of("freepool").unwrap(), ["compute-3"]);
    {
        let c = f.cloud.lock().unwrap();
        let a = c.aggregates.values().find(|a| a.name == POOL).unwrap();
        assert_eq!(a.metadata.get("reservation"), Some(&json!(RESERVATION)), "the reservation id, as Blazar's");
        assert_eq!(a.metadata.get("filter_tenant_id"), Some(&json!("demo")));
    }
    let done = f.changes();
    assert_eq!(
        done.iter().filter(|(m, p)| m == "POST" && p == "/os-aggregates").count(),
        1,
        "one aggregate created: {done:?}"
    );

    // The same key again (a retry, a second berthd): the same answer, and
    // Nova's 409 for hosts already in the aggregate is success; nothing changes.
    let again = f.driver.call("on_start", &start, "start-key").await.unwrap();
    assert_eq!(again, answer);
    assert_eq!(f.changes(), done, "a replay changes nothing on Nova");
    assert!(f.cloud.lock().unwrap().log.iter().any(|(m, p, s)| m == "POST" && p.ends_with("/action") && *s == 409));
    assert_eq!(f.hosts_of(POOL).unwrap(), ["compute-1", "compute-2"]);

    // At the end (release): the other consumer's server is deleted, the
    // hosts leave the lease's aggregate, it goes, and they are free again.
    f.cloud.lock().unwrap().servers.insert("srv-other".into(), "ACTIVE".into());
    let end = host_payload("end_lease", json!([{"consumer_id": "srv-other", "project_id": "other"}]));
    let answer = f.driver.call("release", &end, "end-key").await.unwrap();
    assert_eq!(
        answer,
        json!({"aggregate": POOL, "hosts": ["compute-1", "compute-2"], "deleted_servers": ["srv-other"]})
    );
    assert_eq!(f.hosts_of(POOL), None, "the lease's aggregate is deleted");
    assert_eq!(f.status("srv-other"), None);
    let mut free = f.hosts_of("freepool").unwrap();
    free.sort();
    assert_eq!(free, ["compute-1", "compute-2", "compute-3"]);
    let done = f.changes();
    assert_eq!(f.driver.call("release", &end, "end-key").await.unwrap(), answer);
    assert_eq!(f.changes(), done, "a replayed end changes nothing on Nova");
    assert_eq!(f.cloud.lock().unwrap().tokens_issued, 1, "one Keystone session serves every call");
}

#[tokio::test]
async fn recycle_keeps_busy_hosts_out_of_the_free_pool() {
    let f = Fixture::start(true).await;
    f.driver.call("on_start", &host_payload("start_lease", json!([])), "k1").await.unwrap();
    let end = host_payload("end_lease", json!([{"consumer_id": "srv-1"}]));
    f.driver.call("recycle", &end, "k2").await.unwrap();
    assert_eq!(f.hosts_of(POOL), None);
    assert_eq!(f.hosts_of("freepool").unwrap(), ["compute-3", "compute-2"], "compute-1 still has srv-1 on it");
}

#[tokio::test]
async fn nova_answering_503_is_retried_with_backoff() {
    let f = Fixture::start(false).await;
    f.cloud.lock().unwrap().busy = 2;
    let answer = f.driver.call("on_start", &host_payload("start_lease", json!([])), "k").await.unwrap();
    assert_eq!(answer["hosts"], json!(["compute-1", "compute-2"]));
    assert_eq!(f.hosts_of(POOL).unwrap(), ["compute-1", "compute-2"]);
    let busy_answers = f.cloud.lock().unwrap().log.iter().filter(|(_, _, s)| *s == 503).count();
    assert_eq!(busy_answers, 2);

    // Busy past the retries: a failure the manager may retry later.
    f.cloud.lock().unwrap().busy = 10;
    let e = f.driver.call("release", &host_payload("end_lease", json!([])), "k2").await.unwrap_err();
    assert!(!e.permanent, "{e:?}");
    assert!(e.message.contains("503") && e.message.contains("nova-api is restarting"), "{}", e.message);
    assert_eq!(f.cloud.lock().unwrap().busy, 6, "one attempt and three retries");
}

fn instance_payload(server: Option<&str>) -> Value {
    json!({
        "resource_type": "virtual:instance", "event_type": "start_lease",
        "instance_id": server, "consumer_id": "c-1",
        "resource_provider": {"uuid": "00000000-0000-0000-0000-000000000001", "name": "compute-1"},
        "resources": {"VCPU": 1}, "lease": {"id": "l-2"}, "reservation": {"id": "r-2"},
    })
}

#[tokio::test]
async fn instances_wake_up_and_end_by_the_plugins_policy() {
    let f = Fixture::start(false).await;
    {
        let mut c = f.cloud.lock().unwrap();
        c.servers.insert("srv-shelved".into(), "SHELVED_OFFLOADED".into());
        c.servers.insert("srv-stopped".into(), "SHUTOFF".into());
    }
    for server in ["srv-shelved", "srv-stopped"] {
        let p = instance_payload(Some(server));
        let answer = f.driver.call("wake_up", &p, &format!("start:{server}")).await.unwrap();
        assert_eq!(answer, json!({"server": server, "state": "ACTIVE"}));
        assert_eq!(f.status(server).as_deref(), Some("ACTIVE"));
        let done = f.changes();
        assert_eq!(f.driver.call("wake_up", &p, &format!("start:{server}")).await.unwrap(), answer);
        assert_eq!(f.changes(), done, "a replayed wake-up changes nothing");
    }
    assert!(f.changes().iter().any(|(_, p)| p == "/servers/srv-shelved/action"));

    // on_end = "shelve": a server already shelved (Nova's 409) is success.
    let p = instance_payload(Some("srv-shelved"));
    let answer = f.driver.call("shelve", &p, "end:1").await.unwrap();
    assert_eq!(answer, json!({"server": "srv-shelved", "state": "SHELVED_OFFLOADED"}));
    assert_eq!(f.status("srv-shelved").as_deref(), Some("SHELVED_OFFLOADED"));
    let done = f.changes();
    assert_eq!(f.driver.call("shelve", &p, "end:1").await.unwrap(), answer);
    assert_eq!(f.changes(), done);

    // on_end = "delete": a server already gone (404) is success.
    let p = instance_payload(Some("srv-stopped"));
    let answer = f.driver.call("delete", &p, "end:2").await.unwrap();
    assert_eq!(f.status("srv-stopped"), None);
    assert_eq!(f.driver.call("delete", &p, "end:2").await.unwrap(), answer);

    // A slot no instance was named for: nothing to do on Nova.
    assert_eq!(f.driver.call("wake_up", &instance_payload(None), "k").await.unwrap(), json!({"server": null}));
}

#[tokio::test]
async fn nova_refusals_are_failures_that_say_why() {
    let f = Fixture::start(false).await;
    let e = f.driver.call("wake_up", &instance_payload(Some("srv-none")), "k").await.unwrap_err();
    assert!(e.permanent && e.message.contains("no server srv-none"), "{e:?}");

    // A host Nova does not know: its 404, with its message.
    let mut p = host_payload("start_lease", json!([]));
    p["hosts"][1]["resource_provider"]["name"] = json!("compute-9");
    let e = f.driver.call("on_start", &p, "k").await.unwrap_err();
    assert!(e.permanent, "{e:?}");
    assert!(e.message.contains("404") && e.message.contains("Compute host compute-9 could not be found"), "{e:?}");

    // Wrong credentials: Keystone's 401 is the operator's to mend.
    let mut c = serde_json::from_value::<DriverConfig>(json!({
        "driver": "openstack", "auth_url": format!("{}/identity/v3", f.cloud.lock().unwrap().base),
        "username": "berth", "password": "wrong", "project_name": "service",
    }))
    .unwrap();
    let e = c.build().unwrap().call("wake_up", &instance_payload(Some("x")), "k").await.unwrap_err();
    assert!(e.permanent && e.message.contains("401"), "{e:?}");

    // A configuration without credentials is refused when built.
    c = serde_json::from_value(json!({"driver": "openstack", "auth_url": "http://127.0.0.1:1/v3"})).unwrap();
    assert!(c.build().is_err());
}

fn hook(event_type: &str, key: &str, reservation: Value, allocations: Value) -> Hook {
    Hook {
        event_type: event_type.into(),
        idempotency_key: key.into(),
        attempt: 1,
        lease: json!({"id": "l-3", "name": "workshop", "project_id": "demo", "user_id": "alice"}),
        reservation,
        allocations: serde_json::from_value(allocations).unwrap(),
    }
}

/// The built-in plugins as berthd builds them from `[plugins]`, acting on
/// Nova through the driver: the payloads they send are the ones the
/// driver reads.
#[tokio::test]
async fn the_built_in_plugins_drive_nova_through_a_lease() {
    let f = Fixture::start(true).await;
    let plugins: PluginsConfig = serde_json::from_value(json!({
        "drivers": {"physical:host": f.config, "virtual:instance": f.config},
        "instance": {"on_end": "shelve"},
    }))
    .unwrap();
    let builtins = plugins.builtins().unwrap();
    let registry = plugins.registry(builtins).unwrap();
    let host = registry.get("physical:host").unwrap();
    let instance = registry.get("virtual:instance").unwrap();
    assert_eq!(host.driver_kind(), Some("openstack"));

    let reservation =
        json!({"id": RESERVATION, "resource_type": "physical:host", "resource_id": POOL, "min": 1, "max": 1});
    let held = json!([{"resource_provider": {"uuid": "00000000-0000-0000-0000-000000000003", "name": "compute-3"},
                       "consumer_id": RESERVATION, "resources": {"VCPU": 8}}]);
    let started = host.on_start(&hook("start_lease", "s", reservation.clone(), held.clone())).await.unwrap();
    assert_eq!(started.detail, json!({"aggregate": POOL, "hosts": ["compute-3"]}));
    assert_eq!(started.effects.len(), 1, "the pool move is recorded: {:?}", started.effects);
    assert_eq!(f.hosts_of(POOL).unwrap(), ["compute-3"]);
    assert_eq!(f.hosts_of("freepool").unwrap(), ["compute-1", "compute-2"]);
    host.on_end(&hook("end_lease", "e", reservation, held)).await.unwrap();
    assert_eq!(f.hosts_of(POOL), None);
    assert_eq!(f.hosts_of("freepool").unwrap(), ["compute-1", "compute-2", "compute-3"]);

    f.cloud.lock().unwrap().servers.insert("srv-a".into(), "SHELVED_OFFLOADED".into());
    let reservation = json!({"id": "r-4", "resource_type": "virtual:instance", "amount": 1, "vcpus": 1,
                             "memory_mb": 512, "instance_ids": ["srv-a"]});
    let slot = json!([{"resource_provider": {"uuid": "00000000-0000-0000-0000-000000000001", "name": "compute-1"},
                       "consumer_id": "6c9d0f43-7f1e-4f5e-9a4b-1b2c3d4e5f60", "resources": {"VCPU": 1, "MEMORY_MB": 512}}]);
    instance.on_start(&hook("start_lease", "s2", reservation.clone(), slot.clone())).await.unwrap();
    assert_eq!(f.status("srv-a").as_deref(), Some("ACTIVE"));
    instance.on_end(&hook("end_lease", "e2", reservation, slot)).await.unwrap();
    assert_eq!(f.status("srv-a").as_deref(), Some("SHELVED_OFFLOADED"), "on_end = shelve");
}

#[tokio::test]
async fn a_token_nova_refuses_is_renewed_once() {
    let f = Fixture::start(false).await;
    f.cloud.lock().unwrap().servers.insert("srv".into(), "SHUTOFF".into());
    f.driver.call("wake_up", &instance_payload(Some("srv")), "k1").await.unwrap();
    f.cloud.lock().unwrap().revoke = true;
    f.driver.call("shelve", &instance_payload(Some("srv")), "k2").await.unwrap();
    assert_eq!(f.status("srv").as_deref(), Some("SHELVED_OFFLOADED"));
    let c = f.cloud.lock().unwrap();
    assert_eq!(c.tokens_issued, 3, "the first token, the revoked one skipped, a fresh one");
    assert_eq!(c.log.iter().filter(|(_, _, s)| *s == 401).count(), 1, "one 401, then the fresh token");
}

/// A start cut off between creating the aggregate and setting its
/// metadata: the retry finds the aggregate and sets what it lacks.
#[tokio::test]
async fn a_start_cut_off_after_creating_the_aggregate_completes_it() {
    let f = Fixture::start(false).await;
    {
        let mut c = f.cloud.lock().unwrap();
        c.next_id += 1;
        let id = c.next_id;
        c.aggregates.insert(id, Aggregate { name: POOL.into(), ..Default::default() });
    }
    f.driver.call("on_start", &host_payload("start_lease", json!([])), "k").await.unwrap();
    let c = f.cloud.lock().unwrap();
    assert_eq!(c.aggregates.len(), 1, "no second aggregate");
    let a = c.aggregates.values().next().unwrap();
    assert_eq!(a.metadata.get("reservation"), Some(&json!(RESERVATION)));
    assert_eq!(a.hosts, ["compute-1", "compute-2"]);
}
