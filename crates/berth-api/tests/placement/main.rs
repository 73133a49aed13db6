//! Placement over HTTP, beyond what Placement's own conformance files cover:
//! auth, bad input that must write nothing, capacity decided under
//! concurrency, allocation candidates on nested and sharing providers, the
//! "held now" read views beside future holds, and replay after a workload.
//! A real PostgreSQL (TestDatabase) and the real router on a loopback port.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;

use berth_api::{ApiConfig, AppState, Authenticator, Rules};
use berth_core::event::Allocation;
use berth_core::{EventMeta, Window};
use berth_store::commands::{ConsumerAllocations, GenerationCheck};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

mod candidates;
mod order;

struct Api {
    base: String,
    http: reqwest::Client,
    store: Store,
    _db: TestDatabase,
}

struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Api {
    async fn start() -> Api {
        Api::start_with(ApiConfig::default()).await
    }

    async fn start_with(config: ApiConfig) -> Api {
        let db = TestDatabase::new().await;
        let store = db.store(8);
        let state = AppState {
            app: berth_app::App::bare(store.clone()),
            auth: Arc::new(Authenticator::Noauth),
            rules: Arc::new(Rules::defaults()),
            clock: Default::default(),
            build: berth_api::Build::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, berth_api::router_with(state, config)).await.unwrap() });
        Api { base: format!("http://{addr}/placement"), http: reqwest::Client::new(), store, _db: db }
    }

    /// A request as `token` (None: anonymous) at microversion 1.39.
    async fn call(&self, token: Option<&str>, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.call_with(token, &[], method, path, body).await
    }

    async fn call_with(
        &self,
        token: Option<&str>,
        headers: &[(&str, &str)],
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("openstack-api-version")) {
            r = r.header("openstack-api-version", "placement 1.39");
        }
        if let Some(t) = token {
            r = r.header("x-auth-token", t);
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer { status, headers, body }
    }

    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.call(Some("admin"), method, path, body).await
    }

    async fn provider(&self, name: &str, parent: Option<Uuid>) -> Uuid {
        let a = self
            .admin(Method::POST, "/resource_providers", Some(json!({"name": name, "parent_provider_uuid": parent})))
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        a.body["uuid"].as_str().unwrap().parse().unwrap()
    }

    async fn inventory(&self, rp: Uuid, inventories: Value) {
        let g = self.admin(Method::GET, &format!("/resource_providers/{rp}"), None).await.body["generation"].clone();
        let a = self
            .admin(
                Method::PUT,
                &format!("/resource_providers/{rp}/inventories"),
                Some(json!({"resource_provider_generation": g, "inventories": inventories})),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    }

    async fn traits(&self, rp: Uuid, traits: &[&str]) {
        let g = self.admin(Method::GET, &format!("/resource_providers/{rp}"), None).await.body["generation"].clone();
        let a = self
            .admin(
                Method::PUT,
                &format!("/resource_providers/{rp}/traits"),
                Some(json!({"resource_provider_generation": g, "traits": traits})),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    }

    async fn aggregates(&self, rp: Uuid, aggregates: &[Uuid]) {
        let g = self.admin(Method::GET, &format!("/resource_providers/{rp}"), None).await.body["generation"].clone();
        let a = self
            .admin(
                Method::PUT,
                &format!("/resource_providers/{rp}/aggregates"),
                Some(json!({"resource_provider_generation": g, "aggregates": aggregates})),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    }

    async fn claim(&self, consumer: Uuid, allocations: Value) -> Answer {
        let body = json!({
            "allocations": allocations,
            "project_id": "p1",
            "user_id": "u1",
            "consumer_generation": null,
            "consumer_type": "INSTANCE",
        });
        self.admin(Method::PUT, &format!("/allocations/{consumer}"), Some(body)).await
    }

    /// Events in the log, counted directly (a log reader's cursor may lag
    /// behind the last commit by design).
    async fn log_length(&self) -> i64 {
        let (c, conn) = tokio_postgres::connect(&self._db.url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        c.query_one("SELECT count(*) AS entries FROM log_events", &[]).await.unwrap().get("entries")
    }
}

fn code(a: &Answer) -> &str {
    a.body["errors"][0]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn anonymous_callers_get_401_except_at_the_root_and_members_get_403() {
    let api = Api::start().await;
    let root = api.call(None, Method::GET, "/", None).await;
    assert_eq!(root.status, StatusCode::OK);
    assert_eq!(root.body["versions"][0]["max_version"], "1.39");
    assert_eq!(root.headers["openstack-api-version"], "placement 1.39");

    let anon = api.call(None, Method::GET, "/resource_providers", None).await;
    assert_eq!(anon.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anon.body["errors"][0]["status"], 401);
    assert!(anon.headers.contains_key("x-openstack-request-id"));
    assert_eq!(anon.body["errors"][0]["request_id"], anon.headers["x-openstack-request-id"].to_str().unwrap());

    for (method, path, body) in [
        (Method::GET, "/resource_providers", None),
        (Method::POST, "/resource_providers", Some(json!({"name": "nope"}))),
        (Method::PUT, "/traits/CUSTOM_NOPE", None),
        (Method::POST, "/resource_classes", Some(json!({"name": "CUSTOM_NOPE"}))),
    ] {
        let a = api.call(Some("alice:p1"), method.clone(), path, body).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{method} {path}");
        assert_eq!(a.body["errors"][0]["title"], "Forbidden");
    }
    assert_eq!(api.log_length().await, 0, "refused writes append nothing");

    // The service role may write, as Placement's policy allows Nova to.
    let svc = api
        .call_with(
            Some("nova:service"),
            &[("x-roles", "service")],
            Method::POST,
            "/resource_providers",
            Some(json!({"name": "by-service"})),
        )
        .await;
    assert_eq!(svc.status, StatusCode::OK, "{}", svc.body);

    // Members may read their own project's usages, not another's.
    let own = api.call(Some("alice:p1"), Method::GET, "/usages?project_id=p1", None).await;
    assert_eq!(own.status, StatusCode::OK);
    let other = api.call(Some("alice:p1"), Method::GET, "/usages?project_id=p2", None).await;
    assert_eq!(other.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn bad_bodies_are_400_with_a_code_and_write_nothing() {
    let api = Api::start().await;
    let rp = api.provider("host-1", None).await;
    api.inventory(rp, json!({"VCPU": {"total": 4}})).await;
    let before = api.log_length().await;
    let generation =
        api.admin(Method::GET, &format!("/resource_providers/{rp}"), None).await.body["generation"].clone();

    let cases: Vec<(Method, String, Value)> = vec![
        (Method::POST, "/resource_providers".into(), json!({"name": 7})),
        (Method::POST, "/resource_providers".into(), json!({"name": "x", "uuid": "not-a-uuid"})),
        (
            Method::POST,
            format!("/resource_providers/{rp}/inventories"),
            json!({"resource_class": "DISK_GB", "total": 0}),
        ),
        (
            Method::PUT,
            format!("/resource_providers/{rp}/inventories"),
            json!({"resource_provider_generation": generation, "inventories": {"VCPU": {"total": 4, "reserved": 9}}}),
        ),
        (
            Method::PUT,
            format!("/resource_providers/{rp}/inventories"),
            json!({"resource_provider_generation": generation, "inventories": {"CUSTOM_NOT_THERE": {"total": 4}}}),
        ),
        (
            Method::PUT,
            format!("/allocations/{}", Uuid::new_v4()),
            json!({"allocations": {rp.to_string(): {"resources": {"VCPU": 0}}}, "project_id": "p", "user_id": "u",
                   "consumer_generation": null, "consumer_type": "INSTANCE"}),
        ),
        (
            Method::PUT,
            format!("/allocations/{}", Uuid::new_v4()),
            json!({"allocations": {rp.to_string(): {"resources": {"NO_SUCH_CLASS": 1}}}, "project_id": "p",
                   "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"}),
        ),
        (Method::POST, "/reshaper".into(), json!({"inventories": {}, "allocations": {}})),
        (
            Method::PUT,
            format!("/resource_providers/{rp}/traits"),
            json!({"traits": ["NOPE"], "resource_provider_generation": generation}),
        ),
    ];
    for (method, path, body) in cases {
        let a = api.admin(method.clone(), &path, Some(body.clone())).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{method} {path} {body}: {}", a.body);
        assert_eq!(code(&a), "placement.undefined_code", "{method} {path}");
        let detail = a.body["errors"][0]["detail"].as_str().unwrap_or_default();
        // Placement's clients show only an error's last line: it must be the
        // reason, whole.
        let last = detail.rsplit('\n').next().unwrap_or_default();
        assert!(!last.trim().is_empty() && !last.trim_start().starts_with("Failed validating"), "{path}: {detail}");
        if detail.contains("Failed validating") {
            assert!(last.starts_with("JSON does not validate: "), "{path}: {detail}");
        }
    }
    // Malformed JSON and a wrong media type.
    let raw = api
        .http
        .post(format!("{}/resource_providers", api.base))
        .header("x-auth-token", "admin")
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::BAD_REQUEST);
    assert!(raw.text().await.unwrap().contains("Malformed JSON"));
    let media = api
        .http
        .post(format!("{}/resource_providers", api.base))
        .header("x-auth-token", "admin")
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(media.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

    assert_eq!(api.log_length().await, before, "no event was appended");
    let after = api.admin(Method::GET, &format!("/resource_providers/{rp}"), None).await;
    assert_eq!(after.body["generation"], generation);
    let list = api.admin(Method::GET, "/resource_providers", None).await;
    assert_eq!(list.body["resource_providers"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn concurrent_claims_are_decided_by_capacity_alone() {
    let api = Arc::new(Api::start().await);
    let rp = api.provider("host-1", None).await;
    api.inventory(rp, json!({"VCPU": {"total": 10}})).await;
    let mut tasks = Vec::new();
    for _ in 0..24 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            api.claim(Uuid::new_v4(), json!({rp.to_string(): {"resources": {"VCPU": 1}}})).await
        }));
    }
    let mut accepted = 0;
    for t in tasks {
        let a = t.await.unwrap();
        match a.status {
            StatusCode::NO_CONTENT => accepted += 1,
            StatusCode::CONFLICT => {
                let detail = a.body["errors"][0]["detail"].as_str().unwrap();
                assert!(detail.contains("exceed the capacity"), "a refusal says why: {detail}");
            }
            s => panic!("unexpected {s}: {}", a.body),
        }
    }
    assert_eq!(accepted, 10, "exactly the capacity is granted, no spurious conflicts");
    let usage = api.admin(Method::GET, &format!("/resource_providers/{rp}/usages"), None).await;
    assert_eq!(usage.body["usages"]["VCPU"], 10);
    // Once per accepted claim (plus the inventory write): the generation
    // counts what happened, nothing more.
    assert_eq!(usage.body["resource_provider_generation"], 11);
    assert!(api.store.replay_verify().await.unwrap().is_clean());
}

#[tokio::test]
async fn a_failed_claim_leaves_no_consumer_behind() {
    let api = Api::start().await;
    let rp = api.provider("host-1", None).await;
    api.inventory(rp, json!({"VCPU": {"total": 2}})).await;
    let consumer = Uuid::new_v4();
    let a = api.claim(consumer, json!({rp.to_string(): {"resources": {"VCPU": 3}}})).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    let shown = api.admin(Method::GET, &format!("/allocations/{consumer}"), None).await;
    assert_eq!(shown.body, json!({"allocations": {}}));
    // So a retry still says "new consumer".
    let again = api.claim(consumer, json!({rp.to_string(): {"resources": {"VCPU": 2}}})).await;
    assert_eq!(again.status, StatusCode::NO_CONTENT, "{}", again.body);
    let stale = api.claim(consumer, json!({rp.to_string(): {"resources": {"VCPU": 1}}})).await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(code(&stale), "placement.concurrent_update");
}

#[tokio::test]
async fn read_views_show_what_is_held_now_and_candidates_count_what_comes() {
    let api = Api::start().await;
    let rp = api.provider("host-1", None).await;
    api.inventory(rp, json!({"VCPU": {"total": 8}})).await;
    // A hold that begins in an hour (as a lease's would), written directly.
    let start = chrono::Utc::now() + chrono::Duration::hours(1);
    let future = ConsumerAllocations {
        consumer: Uuid::new_v4(),
        project_id: "p1".into(),
        user_id: "u1".into(),
        consumer_type: None,
        generation: GenerationCheck::New,
        allocations: vec![Allocation {
            provider: rp,
            resource_class: "VCPU".into(),
            used: 6,
            window: Window::new(start, Some(start + chrono::Duration::hours(2))).unwrap(),
        }],
    };
    api.store.replace_allocations(&EventMeta::default(), vec![future]).await.unwrap();
    let usage = api.admin(Method::GET, &format!("/resource_providers/{rp}/usages"), None).await;
    assert_eq!(usage.body["usages"]["VCPU"], 0, "not held yet");
    let totals = api.admin(Method::GET, "/usages?project_id=p1", None).await;
    assert_eq!(totals.body["usages"], json!({}));
    // A claim now holds open-ended, so it meets the future hold: 3 does not fit.
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:3", None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 0);
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:2", None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 1);
    assert_eq!(c.body["provider_summaries"][rp.to_string()]["resources"]["VCPU"]["used"], 6);
    let refused = api.claim(Uuid::new_v4(), json!({rp.to_string(): {"resources": {"VCPU": 3}}})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn candidates_on_nested_and_sharing_providers() {
    let api = Api::start().await;
    // compute with two NUMA children (VCPU) and a NIC (bandwidth), plus a
    // shared disk in an aggregate with the compute.
    let cn = api.provider("cn", None).await;
    let numa0 = api.provider("cn-numa0", Some(cn)).await;
    let numa1 = api.provider("cn-numa1", Some(cn)).await;
    let nic = api.provider("cn-nic", Some(numa1)).await;
    let disk = api.provider("shared-disk", None).await;
    api.inventory(cn, json!({"MEMORY_MB": {"total": 4096}})).await;
    api.inventory(numa0, json!({"VCPU": {"total": 4}})).await;
    api.inventory(numa1, json!({"VCPU": {"total": 4}})).await;
    api.inventory(nic, json!({"NET_BW_EGR_KILOBIT_PER_SEC": {"total": 1000}})).await;
    api.inventory(disk, json!({"DISK_GB": {"total": 100}})).await;
    api.traits(numa1, &["HW_NUMA_ROOT"]).await;
    api.traits(disk, &["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"]).await;
    let agg = Uuid::new_v4();
    api.aggregates(cn, &[agg]).await;
    api.aggregates(disk, &[agg]).await;

    // The unsuffixed group spreads over the tree and the shared disk.
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:2,MEMORY_MB:512,DISK_GB:10", None).await;
    let reqs = c.body["allocation_requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2, "VCPU from either NUMA node: {}", c.body);
    for r in reqs {
        assert_eq!(r["allocations"][disk.to_string()]["resources"]["DISK_GB"], 10);
        assert_eq!(r["allocations"][cn.to_string()]["resources"]["MEMORY_MB"], 512);
        assert!(r["mappings"][""].as_array().unwrap().len() == 3);
    }
    let summaries = c.body["provider_summaries"].as_object().unwrap();
    assert_eq!(summaries.len(), 5, "the whole tree and the sharing provider");
    assert_eq!(summaries[&nic.to_string()]["parent_provider_uuid"], numa1.to_string());
    assert_eq!(summaries[&nic.to_string()]["root_provider_uuid"], cn.to_string());

    // limit stops the search.
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:2&limit=1", None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 1);

    // Granular groups: isolate puts them on different NUMA nodes.
    let q = "/allocation_candidates?resources1=VCPU:2&resources2=VCPU:2&group_policy=isolate";
    let c = api.admin(Method::GET, q, None).await;
    let reqs = c.body["allocation_requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2, "either group on either node: {}", c.body);
    assert_eq!(reqs[0]["allocations"].as_object().unwrap().len(), 2);
    // group_policy=none may also stack them on one node (4 fits exactly):
    // both on numa0, both on numa1, and the two ways of splitting them.
    let q = "/allocation_candidates?resources1=VCPU:2&resources2=VCPU:2&group_policy=none";
    let c = api.admin(Method::GET, q, None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 4, "{}", c.body);

    // same_subtree: the VCPU and the bandwidth under one NUMA node: only numa1.
    let q = "/allocation_candidates?resources_cpu=VCPU:1&resources_net=NET_BW_EGR_KILOBIT_PER_SEC:100\
             &group_policy=none&same_subtree=_cpu,_net";
    let c = api.admin(Method::GET, q, None).await;
    let reqs = c.body["allocation_requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 1, "{}", c.body);
    assert_eq!(reqs[0]["mappings"]["_cpu"], json!([numa1.to_string()]));

    // Required and forbidden traits on a granular group; root_required.
    let c = api.admin(Method::GET, "/allocation_candidates?resources1=VCPU:1&required1=HW_NUMA_ROOT", None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 1);
    let c = api.admin(Method::GET, "/allocation_candidates?resources1=VCPU:1&required1=!HW_NUMA_ROOT", None).await;
    assert_eq!(c.body["allocation_requests"][0]["mappings"]["1"], json!([numa0.to_string()]));
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:1&root_required=!HW_NUMA_ROOT", None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 2);
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:1&root_required=HW_NUMA_ROOT", None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 0);

    // Before 1.29: one provider per tree; the disk is the only one with DISK_GB.
    let old = api
        .call_with(
            Some("admin"),
            &[("openstack-api-version", "placement 1.28")],
            Method::GET,
            "/allocation_candidates?resources=DISK_GB:1",
            None,
        )
        .await;
    assert_eq!(old.body["allocation_requests"].as_array().unwrap().len(), 1);

    // Bad requests.
    let bad = api.admin(Method::GET, "/allocation_candidates?resources1=VCPU:1&resources2=VCPU:1", None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "group_policy is required");
    let bad = api.admin(Method::GET, "/allocation_candidates?resources=CUSTOM_NONE:1", None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    // Claiming a candidate as returned works.
    let c = api.admin(Method::GET, "/allocation_candidates?resources=VCPU:2,MEMORY_MB:512,DISK_GB:10", None).await;
    let pick = c.body["allocation_requests"][0]["allocations"].clone();
    let claimed = api.claim(Uuid::new_v4(), pick).await;
    assert_eq!(claimed.status, StatusCode::NO_CONTENT, "{}", claimed.body);
    assert!(api.store.replay_verify().await.unwrap().is_clean());
}

#[tokio::test]
async fn errors_are_html_for_clients_that_do_not_take_json() {
    let api = Api::start().await;
    let a = api.call_with(Some("admin"), &[("accept", "text/html")], Method::GET, "/no/such/thing", None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    let m = api.call(Some("admin"), Method::DELETE, "/resource_providers", None).await;
    assert_eq!(m.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(m.headers["allow"], "GET, POST");
    let v = api.call_with(Some("admin"), &[("openstack-api-version", "placement 2.0")], Method::GET, "/", None).await;
    assert_eq!(v.status, StatusCode::NOT_ACCEPTABLE);
}
