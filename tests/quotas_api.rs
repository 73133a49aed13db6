//! Quotas and lease policy, black box: a real berthd on a real database,
//! driven over HTTP through `/placement`, `/v1/leases` and `/v1/quotas`.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};

use berth_testkit::Server;
use chrono::{DateTime, Duration, DurationRound, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const MEMBER: &str = "alice:p1";
const OTHER: &str = "bob:p2";

/// `h` hours after a future hour boundary, in Blazar's input format.
fn at(h: i64) -> String {
    let base: DateTime<Utc> = (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap();
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

fn minutes_from_now(m: i64) -> String {
    (Utc::now() + Duration::minutes(m)).format("%Y-%m-%d %H:%M").to_string()
}

async fn enrol(s: &Server, name: &str, vcpus: i64) {
    let body = json!({"name": name, "vcpus": vcpus, "memory_mb": 1_000_000, "local_gb": 100_000});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
}

fn instances(name: &str, start: &str, end: &str, amount: u32, vcpus: i64) -> Value {
    json!({
        "name": name, "start_date": start, "end_date": end,
        "reservations": [{"resource_type": "virtual:instance", "amount": amount, "vcpus": vcpus,
                          "memory_mb": 16, "disk_gb": 1, "affinity": null}],
        "events": []
    })
}

async fn set_limits(s: &Server, path: &str, quotas: Value) -> Value {
    let (st, body) = s.put(path, ADMIN, json!({ "quotas": quotas })).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body
}

async fn usage(s: &Server, project: &str, query: &str) -> Value {
    let (st, body) = s.get(&format!("/v1/quotas/projects/{project}/usage{query}"), ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["usage"].clone()
}

/// A Placement call at microversion 1.28 (consumer generations), as admin.
async fn placement(s: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}/placement{path}", s.url))
        .header("x-auth-token", ADMIN)
        .header("openstack-api-version", "placement 1.28")
        .header("accept", "application/json");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_placement_claims_under_a_limit_of_ten_get_exactly_ten() {
    let s = Arc::new(Server::start().await);
    let (st, rp) =
        placement(&s, reqwest::Method::POST, "/resource_providers", Some(json!({"name": "compute-1"}))).await;
    assert_eq!(st, StatusCode::OK, "{rp}");
    let rp = rp["uuid"].as_str().unwrap().to_string();
    let inv = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1000}}});
    let (st, body) =
        placement(&s, reqwest::Method::PUT, &format!("/resource_providers/{rp}/inventories"), Some(inv)).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    set_limits(&s, "/v1/quotas/projects/p1", json!({"VCPU": 10})).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(40));
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (s, rp, barrier) = (s.clone(), rp.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let consumer = uuid::Uuid::new_v4();
            let body = json!({"allocations": {rp: {"resources": {"VCPU": 1}}},
                              "project_id": "p1", "user_id": "alice", "consumer_generation": null});
            barrier.wait().await;
            placement(&s, reqwest::Method::PUT, &format!("/allocations/{consumer}"), Some(body)).await
        }));
    }
    let mut granted = 0;
    for t in tasks {
        let (st, body) = t.await.unwrap();
        match st {
            StatusCode::NO_CONTENT => granted += 1,
            StatusCode::FORBIDDEN => {
                // Placement's error document, with Berth's code.
                let e = &body["errors"][0];
                assert_eq!(e["code"], "berth.quota.exceeded", "{body}");
                assert_eq!(e["status"], 403);
                assert!(e["detail"].as_str().unwrap().contains("limit 10"), "{body}");
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(granted, 10);
    let u = usage(&s, "p1", "").await;
    assert_eq!((u["VCPU"]["limit"].clone(), u["VCPU"]["in_use"].clone()), (json!(10), json!(10)));
    let (st, body) = placement(&s, reqwest::Method::GET, &format!("/resource_providers/{rp}/usages"), None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body["usages"]["VCPU"], 10);
    s.replay_verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_leases_under_a_limit_of_ten_get_exactly_ten() {
    let s = Arc::new(Server::start().await);
    enrol(&s, "h1", 64).await;
    enrol(&s, "h2", 64).await;
    set_limits(&s, "/v1/quotas/projects/p1", json!({"VCPU": 10})).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(40));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let (s, barrier) = (s.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            s.post("/v1/leases", MEMBER, instances(&format!("l{i}"), &at(1), &at(3), 1, 1)).await
        }));
    }
    let mut granted = 0;
    for t in tasks {
        let (st, body) = t.await.unwrap();
        match st {
            StatusCode::CREATED => granted += 1,
            StatusCode::FORBIDDEN => {
                // Blazar's error document, with Berth's code.
                assert_eq!(body["code"], "berth.quota.exceeded", "{body}");
                assert_eq!(body["error_code"], 403);
                assert!(body["error_message"].as_str().unwrap().contains("VCPU"), "{body}");
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(granted, 10);
    let (st, leases) = s.get("/v1/leases", MEMBER).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(leases["leases"].as_array().unwrap().len(), 10);
    let u = usage(&s, "p1", &format!("?start={}&end={}", at(0).replace(' ', "%20"), at(5).replace(' ', "%20"))).await;
    assert_eq!(u["VCPU"]["peak"], 10);
    assert_eq!(u["VCPU"]["in_use"], 0);
    s.replay_verify();
}

#[tokio::test]
async fn leases_are_checked_over_their_window_and_limits_behave() {
    let s = Server::start().await;
    enrol(&s, "h1", 64).await;
    set_limits(&s, "/v1/quotas/defaults", json!({"VCPU": 10, "leases": 5})).await;
    let (st, a) = s.post("/v1/leases", MEMBER, instances("a", &at(2), &at(4), 4, 2)).await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    // Over only during 3..4: refused, nothing written.
    let (st, e) = s.post("/v1/leases", MEMBER, instances("b", &at(3), &at(6), 1, 3)).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.quota.exceeded")), "{e}");
    // Beside it: granted.
    let (st, c) = s.post("/v1/leases", MEMBER, instances("c", &at(4), &at(6), 5, 2)).await;
    assert_eq!(st, StatusCode::CREATED, "{c}");
    // Another project has its own default of 10.
    let (st, _) = s.post("/v1/leases", OTHER, instances("x", &at(2), &at(4), 5, 2)).await;
    assert_eq!(st, StatusCode::CREATED);
    // Growing "a" by one instance exceeds; shrinking it is fine, and frees room.
    let a_id = a["lease"]["id"].as_str().unwrap().to_string();
    let rid = a["lease"]["reservations"][0]["id"].as_str().unwrap().to_string();
    let grow = json!({"reservations": [{"id": rid, "amount": 6}]});
    let (st, e) = s.put(&format!("/v1/leases/{a_id}"), MEMBER, grow.clone()).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.quota.exceeded")), "{e}");
    let (st, _) =
        s.put(&format!("/v1/leases/{a_id}"), MEMBER, json!({"reservations": [{"id": rid, "amount": 2}]})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, b) = s.post("/v1/leases", MEMBER, instances("b", &at(3), &at(4), 1, 3)).await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    // A user limit within the project.
    set_limits(&s, "/v1/quotas/projects/p1/users/carol", json!({"VCPU": 1})).await;
    let (st, e) = s.post("/v1/leases", "carol:p1", instances("carol", &at(20), &at(21), 1, 2)).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{e}");
    assert!(e["error_message"].as_str().unwrap().contains("user carol in project p1"), "{e}");
    let (st, _) = s.post("/v1/leases", "carol:p1", instances("carol", &at(20), &at(21), 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED);
    // Lowering the project's limit below its peak: accepted and reported; increases refused.
    let body = set_limits(&s, "/v1/quotas/tenants/p1", json!({"VCPU": 6})).await;
    assert_eq!(body["quotas"]["VCPU"], 6);
    assert_eq!(body["quotas"]["leases"], 5, "the default still applies: {body}");
    let over = body["over_limit"].as_array().unwrap();
    assert_eq!(over.len(), 1, "{body}");
    assert_eq!((over[0]["resource"].clone(), over[0]["usage"].clone()), (json!("VCPU"), json!(10)));
    let u = usage(&s, "p1", "").await;
    assert_eq!(u["VCPU"]["over_limit"], true);
    assert_eq!(u["leases"]["in_use"], 4);
    let (st, _) = s.post("/v1/leases", MEMBER, instances("more", &at(5), &at(6), 1, 1)).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    // Deleting never needs quota.
    let (st, _) = s.delete(&format!("/v1/leases/{a_id}"), MEMBER).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    // Lease count: 3 held, limit 5 by default; then 2 of its own.
    set_limits(&s, "/v1/quotas/projects/p1", json!({"leases": 3})).await;
    let (st, e) = s.post("/v1/leases", MEMBER, instances("empty", &at(30), &at(31), 1, 1)).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{e}");
    assert!(e["error_message"].as_str().unwrap().contains("leases"), "{e}");
    // DELETE reverts to the defaults.
    let (st, body) = s.delete("/v1/quotas/projects/p1", ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["quotas"], json!({"VCPU": 10, "leases": 5}));
    s.replay_verify();
}

/// Each limit in effect says where it is set: a user's own, its
/// project's (inherited), or the defaults; reading it needs what reading
/// the limits does.
#[tokio::test]
async fn each_limit_says_where_it_is_set() {
    let s = Server::start().await;
    let d = set_limits(&s, "/v1/quotas/defaults", json!({"VCPU": 20, "leases": 5, "MEMORY_MB": 4096})).await;
    assert_eq!(d["sources"], json!({"VCPU": "default", "leases": "default", "MEMORY_MB": "default"}), "{d}");
    set_limits(&s, "/v1/quotas/projects/p1", json!({"VCPU": 8, "MEMORY_MB": -1})).await;
    let u = set_limits(&s, "/v1/quotas/projects/p1/users/alice", json!({"VCPU": 2})).await;
    assert_eq!(u["sources"], json!({"VCPU": "user", "leases": "default", "MEMORY_MB": "project"}), "{u}");
    let (st, p) = s.get("/v1/quotas/projects/p1", MEMBER).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(p["quotas"], json!({"VCPU": 8, "leases": 5, "MEMORY_MB": -1}), "unchanged: {p}");
    assert_eq!(p["sources"], json!({"VCPU": "project", "leases": "default", "MEMORY_MB": "project"}), "{p}");
    let (st, q) = s.get("/v1/quotas/projects/p1/users/alice", MEMBER).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(q["quotas"], json!({"VCPU": 2, "leases": 5, "MEMORY_MB": -1}), "unchanged: {q}");
    assert_eq!(q["sources"], u["sources"]);
    let (st, q) = s.get("/v1/quotas/projects/p1/users/alice", OTHER).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{q}");
    assert!(q.get("sources").is_none(), "{q}");
}

#[tokio::test]
async fn quota_api_access_and_bad_input() {
    let s = Server::start().await;
    // Admins write; members read their own project only.
    let (st, e) = s.put("/v1/quotas/projects/p1", MEMBER, json!({"quotas": {"VCPU": 5}})).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.forbidden")));
    let (st, _) = s.put("/v1/quotas/defaults", MEMBER, json!({"quotas": {"VCPU": 5}})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    set_limits(&s, "/v1/quotas/projects/p1", json!({"VCPU": 5, "CUSTOM_GPU": -1})).await;
    let (st, q) = s.get("/v1/quotas/projects/p1", MEMBER).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(q["quotas"], json!({"VCPU": 5, "CUSTOM_GPU": -1}));
    let (st, _) = s.get("/v1/quotas/projects/p1", OTHER).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = s.get("/v1/quotas/projects/p1/usage", OTHER).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, u) = s.get("/v1/quotas/projects/p1/usage", MEMBER).await;
    assert_eq!(st, StatusCode::OK, "{u}");
    assert_eq!(u["usage"]["VCPU"], json!({"limit": 5, "in_use": 0, "peak": 0, "over_limit": false}));
    let (st, _) = s.get("/v1/quotas/defaults", OTHER).await;
    assert_eq!(st, StatusCode::OK);
    // User level: effective limits fall back to the project's.
    set_limits(&s, "/v1/quotas/projects/p1/users/alice", json!({"VCPU": 2})).await;
    let (st, q) = s.get("/v1/quotas/projects/p1/users/alice", MEMBER).await;
    assert_eq!(
        (st, q["quotas"]["VCPU"].clone(), q["quotas"]["CUSTOM_GPU"].clone()),
        (StatusCode::OK, json!(2), json!(-1))
    );
    let (st, _) = s.delete("/v1/quotas/projects/p1/users/alice", ADMIN).await;
    assert_eq!(st, StatusCode::OK);
    let (_, q) = s.get("/v1/quotas/projects/p1/users/alice", ADMIN).await;
    assert_eq!(q["quotas"]["VCPU"], 5);
    // null removes one limit.
    let body = set_limits(&s, "/v1/quotas/projects/p1", json!({"CUSTOM_GPU": null})).await;
    assert_eq!(body["quotas"], json!({"VCPU": 5}));
    // Bad input: 400 with a code, nothing written.
    for bad in [
        json!("not an object"),
        json!({"quotas": {"VCPU": "ten"}}),
        json!({"quotas": {"VCPU": -3}}),
        json!({"quotas": {"bogus": 1}}),
        json!({"quotas": {}}),
        Value::String("{".into()),
    ] {
        let (st, e) = s.put("/v1/quotas/projects/p1", ADMIN, bad.clone()).await;
        assert_eq!((st, e["code"].as_str()), (StatusCode::BAD_REQUEST, Some("berth.quota.invalid")), "{bad}: {e}");
    }
    let (st, e) = s.get("/v1/quotas/projects/p1/usage?start=yesterday", ADMIN).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{e}");
    let (st, e) =
        s.get(&format!("/v1/quotas/projects/p1/usage?start={}&end={}", at(5), at(1)).replace(' ', "%20"), ADMIN).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{e}");
    let (_, q) = s.get("/v1/quotas/projects/p1", ADMIN).await;
    assert_eq!(q["quotas"], json!({"VCPU": 5}));
}

/// What the policy receiver saw: (path, token, body).
type Seen = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// A real HTTP policy service: refuses leases named `denied` (with a
/// message) and `garbled` (with a 500), renames to `forbidden`, and
/// records every call.
async fn policy_service() -> (String, Seen) {
    use axum::extract::{Path, State};
    use axum::http::HeaderMap;
    use axum::response::IntoResponse;
    let seen: Seen = Arc::default();
    async fn handle(
        State(seen): State<Seen>,
        Path(call): Path<String>,
        headers: HeaderMap,
        axum::Json(body): axum::Json<Value>,
    ) -> axum::response::Response {
        let token = headers.get("x-auth-token").and_then(|v| v.to_str().ok()).map(str::to_owned);
        seen.lock().unwrap().push((call.clone(), token, body.clone()));
        match (call.as_str(), body["lease"]["name"].as_str()) {
            ("check-create", Some("denied")) => {
                (StatusCode::FORBIDDEN, axum::Json(json!({"message": "denied leases are not welcome"}))).into_response()
            }
            ("check-create", Some("garbled")) => (StatusCode::INTERNAL_SERVER_ERROR, "oops").into_response(),
            ("check-update", Some("forbidden")) => {
                (StatusCode::FORBIDDEN, axum::Json(json!({"message": "no such names"}))).into_response()
            }
            _ => StatusCode::NO_CONTENT.into_response(),
        }
    }
    let app = axum::Router::new().route("/policy/{call}", axum::routing::post(handle)).with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/policy/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn lease_policy_filters_and_the_external_policy_service() {
    let (url, seen) = policy_service().await;
    let config = format!(
        "[policy]\nmax_lease_duration = 86400\nextension_window = 7200\nexempt_projects = [\"ops\"]\n\
         [policy.external]\nurl = \"{url}\"\ntoken = \"s3cret\"\ntimeout_ms = 5000\n"
    );
    let s = Server::start_with_config(Some(&config)).await;
    enrol(&s, "h1", 64).await;
    // Longer than a day: refused by the built-in rule; exempt projects pass.
    let (st, e) = s.post("/v1/leases", MEMBER, instances("long", &at(1), &at(30), 1, 1)).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.policy.max_lease_duration")), "{e}");
    let (st, _) = s.post("/v1/leases", "op:ops", instances("long", &at(1), &at(30), 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED);
    // The external service: its refusal and message; a 500 refuses with a generic message.
    let (st, e) = s.post("/v1/leases", MEMBER, instances("denied", &at(1), &at(2), 1, 1)).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.policy.denied")), "{e}");
    assert_eq!(e["error_message"], "denied leases are not welcome");
    let (st, e) = s.post("/v1/leases", MEMBER, instances("garbled", &at(1), &at(2), 1, 1)).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(!e["error_message"].as_str().unwrap().contains("oops"), "{e}");
    let (st, a) = s.post("/v1/leases", MEMBER, instances("fine", &at(1), &at(2), 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    let id = a["lease"]["id"].as_str().unwrap().to_string();
    // Extending before the window (2 h before the end) opens: refused.
    let (st, e) = s.put(&format!("/v1/leases/{id}"), MEMBER, json!({"end_date": at(3)})).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.policy.extension_window")), "{e}");
    // Shortening is always allowed; the service sees current and new.
    let (st, _) = s.put(&format!("/v1/leases/{id}"), MEMBER, json!({"end_date": at(1).replace(":00", ":30")})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, e) = s.put(&format!("/v1/leases/{id}"), MEMBER, json!({"name": "forbidden"})).await;
    assert_eq!((st, e["error_message"].as_str()), (StatusCode::FORBIDDEN, Some("no such names")), "{e}");
    // Within the window: extended by up to the maximum from the current end.
    let (st, soon) =
        s.post("/v1/leases", MEMBER, instances("soon", &minutes_from_now(2), &minutes_from_now(62), 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED, "{soon}");
    let soon_id = soon["lease"]["id"].as_str().unwrap().to_string();
    let (st, e) = s.put(&format!("/v1/leases/{soon_id}"), MEMBER, json!({"prolong_for": "23h"})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    let (st, e) = s.put(&format!("/v1/leases/{soon_id}"), MEMBER, json!({"prolong_for": "2d"})).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.policy.extension_window")), "{e}");
    // Deleting tells the service.
    let (st, _) = s.delete(&format!("/v1/leases/{id}"), MEMBER).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().all(|(_, token, _)| token.as_deref() == Some("s3cret")));
    assert!(seen.iter().all(|(_, _, b)| b["context"]["project_id"] != "ops"), "exempt projects are not sent");
    let create =
        seen.iter().find(|(c, _, b)| c == "check-create" && b["lease"]["name"] == "fine").expect("check-create");
    assert_eq!(create.2["context"], json!({"user_id": "alice", "project_id": "p1"}));
    assert_eq!(create.2["lease"]["reservations"][0]["resource_type"], "virtual:instance");
    let update = seen.iter().find(|(c, _, b)| c == "check-update" && b["lease"]["name"] == "forbidden").unwrap();
    assert_eq!(update.2["current_lease"]["name"], "fine");
    assert!(seen.iter().any(|(c, _, b)| c == "on-end" && b["lease"]["id"].is_null() && b["lease"]["name"] == "fine"));
}

/// `s` in Blazar's output format, the way advice writes dates.
fn shown(s: &str) -> String {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap().format("%Y-%m-%dT%H:%M:%S.000000").to_string()
}

#[tokio::test]
async fn extensions_follow_the_cutoff_and_the_minimum_and_advice_says_so() {
    let config = "[policy]\nmax_lease_duration = 86400\nextension_cutoff = 3600\nmin_extension = 1800\n";
    let s = Server::start_with_config(Some(config)).await;
    enrol(&s, "h1", 64).await;
    let (st, far) = s.post("/v1/leases", MEMBER, instances("far", &at(1), &at(3), 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED, "{far}");
    let far = far["lease"]["id"].as_str().unwrap().to_string();
    // Advice: nothing else on the host, so the maximum duration bounds it.
    let (st, a) = s.get(&format!("/v1/leases/{far}/extension"), MEMBER).await;
    assert_eq!(st, StatusCode::OK, "{a}");
    let a = &a["extension"];
    assert_eq!(a["latest_end_date"], shown(&at(25)), "{a}");
    assert_eq!((a["limited_by"].as_str(), a["extendable"].as_bool()), (Some("policy"), Some(true)), "{a}");
    assert_eq!((a["closes_at"].as_str(), a["minimum_extension"].as_i64()), (Some(shown(&at(2)).as_str()), Some(1800)));
    assert!(a["opens_at"].is_null(), "{a}");
    assert_eq!(a["reservations"].as_array().map(Vec::len), Some(1), "{a}");
    assert!(a["reservations"][0]["latest_end_date"].is_null(), "capacity alone is unbounded: {a}");
    // Ten minutes more is under the minimum; half an hour is granted.
    let (st, e) = s.put(&format!("/v1/leases/{far}"), MEMBER, json!({"prolong_for": "10m"})).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.policy.extension_too_short")), "{e}");
    let (st, e) = s.put(&format!("/v1/leases/{far}"), MEMBER, json!({"prolong_for": "30m"})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    // A lease ending within the hour: the cut-off has passed.
    let (st, soon) =
        s.post("/v1/leases", MEMBER, instances("soon", &minutes_from_now(2), &minutes_from_now(50), 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED, "{soon}");
    let soon = soon["lease"]["id"].as_str().unwrap().to_string();
    let (_, a) = s.get(&format!("/v1/leases/{soon}/extension"), MEMBER).await;
    assert_eq!(a["extension"]["extendable"], false, "{a}");
    let (st, e) = s.put(&format!("/v1/leases/{soon}"), MEMBER, json!({"prolong_for": "1h"})).await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::FORBIDDEN, Some("berth.policy.extension_cutoff")), "{e}");
    let (_, shown_soon) = s.get(&format!("/v1/leases/{soon}"), MEMBER).await;
    let (_, shown_far) = s.get(&format!("/v1/leases/{far}"), MEMBER).await;
    assert_eq!(shown_far["lease"]["end_date"], shown(&at(3)).replace(":00:00.", ":30:00."), "{shown_far}");
    assert!(shown_soon["lease"]["end_date"].as_str().unwrap() < shown(&at(0)).as_str(), "refused: unchanged");
    // Shortening is no extension: allowed after the cut-off.
    let (st, e) = s.put(&format!("/v1/leases/{soon}"), MEMBER, json!({"reduce_by": "5m"})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
}

#[tokio::test]
async fn a_lease_that_ends_on_its_own_tells_the_policy_service() {
    let (url, seen) = policy_service().await;
    let mut config = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut config, format!("[policy.external]\nurl = \"{url}\"\n").as_bytes()).unwrap();
    // With its manager on: the end event is what tells the service.
    let s = Server::launch(berth_store::testing::TestDatabase::new().await, &[], Some(config.path())).await;
    enrol(&s, "h1", 64).await;
    let end = (Utc::now() + Duration::seconds(2)).to_rfc3339();
    let (st, brief) = s.post("/v1/leases", MEMBER, instances("brief", "now", &end, 1, 1)).await;
    assert_eq!(st, StatusCode::CREATED, "{brief}");
    let brief_id = brief["lease"]["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let told = seen.lock().unwrap().iter().any(|(c, _, b)| c == "on-end" && b["lease"]["name"] == "brief");
        let (_, l) = s.get(&format!("/v1/leases/{brief_id}"), MEMBER).await;
        if told {
            assert_eq!(l["lease"]["status"], "TERMINATED", "told only once ended: {l}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "on-end never sent for a lease that ended: {l}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
