//! Invariant 9, no caller acts beyond its policy: for every route and
//! method `/openapi.json` lists, six callers (anonymous, a reader of p1, a
//! member of p1, a member of p2, a service, an admin) each get the answer
//! the default policy says, on real data of p1: allowed (2xx), 401, 403,
//! 404 where another project's lease is not even shown, or 409 where the
//! policy lets an admin through and the state of the data refuses (an
//! operator's control on a lease that is not in a state for it). A route the
//! table below does not know fails the test. Each allowed write gets fresh
//! data of its own, so every write can succeed.

use std::sync::atomic::{AtomicUsize, Ordering};

use berth_testkit::Server;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

const CALLERS: [&str; 6] = ["anonymous", "reader of p1", "member of p1", "member of p2", "service", "admin"];

/// Each caller's noauth headers.
fn headers(caller: usize) -> Vec<(&'static str, &'static str)> {
    match caller {
        0 => vec![],
        1 => vec![("x-auth-token", "carol:p1"), ("x-roles", "reader")],
        2 => vec![("x-auth-token", "alice:p1"), ("x-roles", "member,reader")],
        3 => vec![("x-auth-token", "bob:p2"), ("x-roles", "member,reader")],
        4 => vec![("x-auth-token", "nova:service"), ("x-roles", "service")],
        _ => vec![("x-auth-token", "admin:admin"), ("x-roles", "admin,member,reader")],
    }
}

/// What the default policy says, per caller in [`CALLERS`] order:
/// A allowed, U 401, F 403, N 404 (not visible), C 409 (allowed; the
/// fixture's state refuses).
fn expected(method: &str, path: &str) -> Option<&'static str> {
    const ANYONE: &str = "AAAAAA";
    const ADMIN: &str = "UFFFFA";
    const PLACEMENT: &str = "UFFFAA";
    Some(match (method, path) {
        ("GET", "/" | "/healthz" | "/readyz" | "/openapi.json" | "/placement/") => ANYONE,
        ("GET", "/ui" | "/ui/{file}" | "/v1/login") => ANYONE,
        // A password login is Keystone's: noauth (this test) has none.
        ("POST", "/v1/login") => "NNNNNN",
        ("GET", "/v1/whoami") => "UAAAAA",
        ("GET", "/v1/calendar") => "UAAAFA",
        ("GET", "/placement/usages") => "UAAFAA",
        // Only a compute service reshapes its own tree.
        ("POST", "/placement/reshaper") => "UFFFAF",
        (_, p) if p.starts_with("/placement/") => PLACEMENT,
        ("GET", "/v1/leases" | "/v1/leases/shared" | "/v1/events" | "/v1/events/stream")
        | ("POST", "/v1/availability" | "/v1/offers") => "UAAAFA",
        ("POST", "/v1/leases") => "UFAAFA",
        ("GET", "/v1/leases/{id}" | "/v1/leases/{id}/extension" | "/v1/leases/{id}/events") => "UAANNA",
        ("PUT" | "DELETE", "/v1/leases/{id}") | ("PUT", "/v1/leases/{id}/shared_with") => "UFANNA",
        // Operators' controls: the fixture's lease waits to start, so its
        // events can be cancelled or fired, but it cannot be ended or
        // recovered, nor its events retried.
        ("POST", "/v1/events/{id}/cancel" | "/v1/events/{id}/fire") => "UFFNNA",
        ("POST", "/v1/events/{id}/retry" | "/v1/leases/{id}/end" | "/v1/leases/{id}/recover") => "UFFNNC",
        // The fixture's lease holds one instance slot: a split would empty it.
        ("POST", "/v1/leases/{id}/split") => "UFCNNC",
        // A member offers, an admin moves at once; the target project is p3.
        ("POST", "/v1/leases/{id}/transfer") => "UFANNA",
        // No offer names the caller's project: 403 where it sees the lease.
        ("POST", "/v1/leases/{id}/transfer/accept") => "UFFNFF",
        // The fixture's lease is offered to no one.
        ("DELETE", "/v1/leases/{id}/transfer") => "UFNNNN",
        ("GET" | "PUT", "/v1/manager") => ADMIN,
        (_, p) if p.starts_with("/v1/os-hosts") => ADMIN,
        ("GET", "/v1/log" | "/v1/log/stream" | "/metrics") => ADMIN,
        ("GET" | "POST", "/v1/maintenance") => ADMIN,
        ("GET", "/v1/loans") => ADMIN,
        // The fixture has no maintenance window: the admin's cancel names none.
        ("DELETE", "/v1/maintenance/{id}") => "UFFFFN",
        ("GET", "/v1/quotas/defaults" | "/v1/plugins") => "UAAAFA",
        ("GET", "/v1/plugins/schema") => "UAAAAA",
        ("GET", p) if p.starts_with("/v1/quotas/") => "UAAFFA",
        ("PUT" | "DELETE", p) if p.starts_with("/v1/quotas/") => ADMIN,
        _ => return None,
    })
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Real data of p1: a host (a provider with inventory) holding a lease of
/// alice's and a Placement consumer of p1; made after them, a spare
/// provider and a spare host nothing holds; a custom class and trait.
struct Fixture {
    provider: String,
    generation: i64,
    consumer: String,
    consumer_generation: i64,
    spare_provider: String,
    host: String,
    spare_host: String,
    lease: String,
    /// The lease's reservation.
    reservation: String,
    /// The lease's start event.
    event: String,
    class: String,
    trait_name: String,
    property: String,
}

async fn call(s: &Server, caller: usize, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut r = reqwest::Client::new()
        .request(method, format!("{}{path}", s.url))
        .header("openstack-api-version", "placement 1.39");
    for (k, v) in headers(caller) {
        r = r.header(k, v);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status();
    // A live stream never ends: its status is the answer.
    if resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream")) {
        return (status, Value::Null);
    }
    (status, serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null))
}

async fn ok(s: &Server, caller: usize, method: Method, path: &str, body: Option<Value>) -> Value {
    let (st, v) = call(s, caller, method.clone(), path, body).await;
    assert!(st.is_success(), "fixture: {method} {path}: {st} {v}");
    v
}

const ADMIN: usize = 5;
const ALICE: usize = 2;

fn lease_body(name: &str) -> Value {
    json!({"name": name, "start_date": "2031-01-02 09:00", "end_date": "2031-01-02 17:00",
           "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1,
                             "memory_mb": 512, "disk_gb": 1}], "events": []})
}

async fn host(s: &Server, name: &str) -> String {
    let body = json!({"name": name, "vcpus": 16, "memory_mb": 32768, "local_gb": 1000, "gpu": "true"});
    ok(s, ADMIN, Method::POST, "/v1/os-hosts", Some(body)).await["host"]["id"].as_str().unwrap().to_string()
}

async fn fixture(s: &Server) -> Fixture {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let host_id = host(s, &format!("host-{n}")).await;
    let rps = ok(s, ADMIN, Method::GET, &format!("/placement/resource_providers?name=host-{n}"), None).await;
    let provider = rps["resource_providers"][0]["uuid"].as_str().unwrap().to_string();
    let lease = ok(s, ALICE, Method::POST, "/v1/leases", Some(lease_body(&format!("lease-{n}")))).await;
    let reservation = lease["lease"]["reservations"][0]["id"].as_str().unwrap().to_string();
    let lease = lease["lease"]["id"].as_str().unwrap().to_string();
    let events = ok(s, ADMIN, Method::GET, &format!("/v1/leases/{lease}/events?event_type=start_lease"), None).await;
    let event = events["events"][0]["id"].as_str().unwrap().to_string();
    let consumer = Uuid::new_v4().to_string();
    let alloc = json!({"allocations": {provider.clone(): {"resources": {"VCPU": 1}}},
                       "project_id": "p1", "user_id": "alice", "consumer_generation": null, "consumer_type": "INSTANCE"});
    ok(s, ADMIN, Method::PUT, &format!("/placement/allocations/{consumer}"), Some(alloc)).await;
    let c = ok(s, ADMIN, Method::GET, &format!("/placement/allocations/{consumer}"), None).await;
    let rp = ok(s, ADMIN, Method::GET, &format!("/placement/resource_providers/{provider}"), None).await;
    let spare =
        ok(s, ADMIN, Method::POST, "/placement/resource_providers", Some(json!({"name": format!("spare-{n}")}))).await
            ["uuid"]
            .as_str()
            .unwrap()
            .to_string();
    let inv = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}});
    ok(s, ADMIN, Method::PUT, &format!("/placement/resource_providers/{spare}/inventories"), Some(inv)).await;
    let spare_host = host(s, &format!("spare-host-{n}")).await;
    let class = format!("CUSTOM_MATRIX_{n}");
    ok(s, ADMIN, Method::PUT, &format!("/placement/resource_classes/{class}"), None).await;
    let trait_name = format!("CUSTOM_MATRIX_{n}");
    ok(s, ADMIN, Method::PUT, &format!("/placement/traits/{trait_name}"), None).await;
    Fixture {
        provider,
        generation: rp["generation"].as_i64().unwrap(),
        consumer,
        consumer_generation: c["consumer_generation"].as_i64().unwrap(),
        spare_provider: spare,
        host: host_id,
        spare_host,
        lease,
        reservation,
        event,
        class,
        trait_name,
        property: "gpu".into(),
    }
}

/// What `{id}` names in `template`: a host, a lease event or a lease.
fn id_of<'f>(template: &str, f: &'f Fixture, deleting: bool) -> &'f str {
    if template.starts_with("/v1/os-hosts") {
        if deleting {
            &f.spare_host
        } else {
            &f.host
        }
    } else if template.starts_with("/v1/events/") {
        &f.event
    } else {
        &f.lease
    }
}

/// A maintenance window over the spare host, far ahead.
fn maintenance_body(f: &Fixture) -> Value {
    json!({"hosts": [f.spare_host], "start_date": "2040-01-01 00:00", "end_date": "2040-01-02 00:00", "reason": "matrix"})
}

/// The body of an action on the fixture's lease or event: a split's or a
/// transfer's; the others (controls, accept) take none.
fn action_body(template: &str, f: &Fixture, n: usize) -> Option<Value> {
    match template {
        "/v1/leases/{id}/split" => {
            Some(json!({"name": format!("part-{n}"), "reservations": [{"id": f.reservation, "count": 1}]}))
        }
        "/v1/leases/{id}/transfer" => Some(json!({"project_id": "p3"})),
        _ => None,
    }
}

/// The concrete request for a documented route on `f`.
// A table, one arm per route with a body: as long as such routes are many.
#[allow(clippy::too_many_lines)]
fn request(method: &str, template: &str, f: &Fixture) -> (String, Option<Value>) {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let deleting = method == "DELETE";
    // What a delete removes must be free of what holds it.
    let provider = if deleting && template.starts_with("/placement/resource_providers/{uuid}") {
        &f.spare_provider
    } else {
        &f.provider
    };
    let name = if template.starts_with("/placement/traits") {
        &f.trait_name
    } else if template.starts_with("/v1/os-hosts/properties") {
        &f.property
    } else {
        &f.class
    };
    let id = id_of(template, f, deleting);
    let mut path = template
        .replace("{uuid}", provider)
        .replace("{consumer_uuid}", &f.consumer)
        .replace("{resource_class}", "VCPU")
        .replace("{name}", name)
        .replace("{id}", id)
        .replace("{project_id}", "p1")
        .replace("{user_id}", "alice")
        .replace("{file}", "console.js");
    match template {
        "/placement/usages" => path.push_str("?project_id=p1"),
        "/placement/allocation_candidates" => path.push_str("?resources=VCPU:1"),
        _ => {}
    }
    let g = f.generation;
    let allocations = json!({provider.clone(): {"resources": {"VCPU": 2}}});
    let body = match (method, template) {
        ("GET" | "DELETE", _) => None,
        ("POST", "/placement/resource_providers") => Some(json!({"name": format!("new-{n}")})),
        ("PUT", "/placement/resource_providers/{uuid}") => Some(json!({"name": format!("renamed-{n}")})),
        ("PUT", "/placement/resource_providers/{uuid}/inventories") => Some(json!({
            "resource_provider_generation": g,
            "inventories": {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 32768}, "DISK_GB": {"total": 1000}}})),
        ("POST", "/placement/resource_providers/{uuid}/inventories") => {
            Some(json!({"resource_provider_generation": g, "resource_class": "CUSTOM_MATRIX_0", "total": 4}))
        }
        ("PUT", "/placement/resource_providers/{uuid}/inventories/{resource_class}") => {
            Some(json!({"resource_provider_generation": g, "total": 20}))
        }
        ("PUT", "/placement/resource_providers/{uuid}/traits") => {
            Some(json!({"resource_provider_generation": g, "traits": ["HW_CPU_X86_AVX"]}))
        }
        ("PUT", "/placement/resource_providers/{uuid}/aggregates") => {
            Some(json!({"resource_provider_generation": g, "aggregates": [Uuid::new_v4()]}))
        }
        ("POST", "/placement/resource_classes") => Some(json!({"name": format!("CUSTOM_NEW_{n}")})),
        ("PUT", "/placement/resource_classes/{name}" | "/placement/traits/{name}") => None,
        ("PUT", "/placement/allocations/{consumer_uuid}") => Some(json!({
            "allocations": allocations, "project_id": "p1", "user_id": "alice",
            "consumer_generation": f.consumer_generation, "consumer_type": "INSTANCE"})),
        ("POST", "/placement/allocations") => Some(json!({Uuid::new_v4().to_string(): {
            "allocations": allocations, "project_id": "p1", "user_id": "alice", "consumer_generation": null, "consumer_type": "INSTANCE"}})),
        ("POST", "/placement/reshaper") => Some(json!({
            "inventories": {provider.clone(): {"resource_provider_generation": g,
                "inventories": {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 32768}, "DISK_GB": {"total": 1000}}}},
            "allocations": {f.consumer.clone(): {"allocations": allocations, "project_id": "p1",
                "user_id": "alice", "consumer_generation": f.consumer_generation, "consumer_type": "INSTANCE"}}})),
        ("POST", "/v1/leases") => Some(lease_body(&format!("new-{n}"))),
        ("PUT", "/v1/leases/{id}") => Some(json!({"name": format!("renamed-{n}")})),
        ("PUT", "/v1/leases/{id}/shared_with") => Some(json!({"projects": ["p9"]})),
        ("POST", "/v1/os-hosts") => {
            Some(json!({"name": format!("new-host-{n}"), "vcpus": 1, "memory_mb": 1, "local_gb": 1}))
        }
        ("PUT", "/v1/os-hosts/{id}") => Some(json!({"rack": "r2"})),
        ("PATCH", "/v1/os-hosts/properties/{name}") => Some(json!({"private": true})),
        ("POST", "/v1/availability" | "/v1/offers") => {
            Some(json!({"reservations": lease_body("x")["reservations"], "duration": 3600}))
        }
        ("PUT", p) if p.starts_with("/v1/quotas/") => Some(json!({"quotas": {"VCPU": 1_000_000}})),
        ("POST", "/v1/login") => Some(json!({"user": "alice", "password": "secret", "project": "p1"})),
        ("POST", p) if p.starts_with("/v1/events/") || p.starts_with("/v1/leases/{id}/") => action_body(p, f, n),
        ("PUT", "/v1/manager") => Some(json!({"paused": false})),
        ("POST", "/v1/maintenance") => Some(maintenance_body(f)),
        (m, p) => panic!("no request body known for {m} {p}: add one"),
    };
    (path, body)
}

#[tokio::test]
async fn every_route_answers_each_caller_as_the_policy_says() {
    let s = Server::start().await;
    let (_, doc) = call(&s, 0, Method::GET, "/openapi.json", None).await;
    let mut routes: Vec<(String, String)> = Vec::new();
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        for method in ops.as_object().unwrap().keys() {
            routes.push((method.to_uppercase(), path.clone()));
        }
    }
    assert!(routes.len() > 70, "only {} routes documented", routes.len());
    let unknown: Vec<String> =
        routes.iter().filter(|(m, p)| expected(m, p).is_none()).map(|(m, p)| format!("{m} {p}")).collect();
    assert!(unknown.is_empty(), "routes with no rule in this matrix: {unknown:?}");

    let shared = fixture(&s).await;
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (method, template) in &routes {
        let want = expected(method, template).unwrap();
        for (caller, outcome) in want.chars().enumerate() {
            // A write that may succeed gets data of its own.
            let own;
            let f = if method != "GET" && outcome == 'A' {
                own = fixture(&s).await;
                &own
            } else {
                &shared
            };
            let (path, body) = request(method, template, f);
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            let (status, answer) = call(&s, caller, m, &path, body).await;
            let right = match outcome {
                'A' => status.is_success(),
                'U' => status == StatusCode::UNAUTHORIZED,
                'F' => status == StatusCode::FORBIDDEN,
                'C' => status == StatusCode::CONFLICT,
                _ => status == StatusCode::NOT_FOUND,
            };
            checked += 1;
            if !right {
                wrong.push(format!("{method} {path} as {}: want {outcome}, got {status} {answer}", CALLERS[caller]));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {checked} answers differ from the policy:\n{}", wrong.len(), wrong.join("\n"));
}
