//! Observability, black box: the access log of a real berthd (one JSON line
//! per request, its request id on every line the request caused) and its
//! `/metrics` (every documented series from start, counters by route).

use berth_store::testing::TestDatabase;
use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::Value;

/// A berthd whose log keeps the access lines and berth-api's debug lines.
async fn server() -> Server {
    let env = [("BERTH_MANAGER__ENABLED", "false"), ("BERTH_LOG", "info,berth_api=debug")];
    Server::launch(TestDatabase::new().await, &env, None).await
}

/// Sends one request and returns its status, its request id and the log
/// lines written while it was served (nothing else runs meanwhile: the
/// manager is off and the client keeps one connection).
async fn traced(
    s: &Server,
    http: &reqwest::Client,
    path: &str,
    token: &str,
    id: Option<&str>,
) -> (StatusCode, String, Vec<Value>) {
    let before = s.log().len();
    let mut req = http.get(format!("{}{path}", s.url)).header("x-auth-token", token);
    if let Some(id) = id {
        req = req.header("x-openstack-request-id", id);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let rid = resp.headers()["x-openstack-request-id"].to_str().unwrap().to_owned();
    resp.bytes().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let lines = s.log()[before..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {l}")))
        .collect();
    (status, rid, lines)
}

/// The request id of a line: its span's field.
fn span_field<'a>(line: &'a Value, name: &str) -> Option<&'a str> {
    line["span"][name].as_str()
}

fn access_line(lines: &[Value]) -> &Value {
    let access: Vec<&Value> = lines.iter().filter(|l| l["target"] == "berth::access").collect();
    assert_eq!(access.len(), 1, "one access line per request: {lines:#?}");
    access[0]
}

#[tokio::test]
async fn a_failed_requests_id_is_on_every_line_it_caused() {
    let s = server().await;
    let http = reqwest::Client::new();

    // A caller's well-formed id is kept, and a 404 is logged with the route's
    // template, never the raw path.
    let mine = format!("req-{}", uuid::Uuid::new_v4());
    let missing = uuid::Uuid::new_v4();
    let (status, rid, lines) = traced(&s, &http, &format!("/v1/leases/{missing}"), ALICE, Some(&mine)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(rid, mine, "the caller's request id is echoed");
    let line = access_line(&lines);
    assert_eq!(line["fields"]["status"], 404, "{line}");
    assert!(line["fields"]["duration_ms"].as_f64().is_some(), "{line}");
    assert_eq!(span_field(line, "method"), Some("GET"), "{line}");
    assert_eq!(span_field(line, "route"), Some("/v1/leases/{id}"), "{line}");
    assert_eq!(span_field(line, "project"), Some("p1"), "{line}");
    assert_eq!(span_field(line, "user"), Some("alice"), "{line}");
    for l in &lines {
        assert_eq!(span_field(l, "request_id"), Some(mine.as_str()), "a line without the request id: {l}");
    }
    assert!(!s.log().contains(&missing.to_string()), "the raw path is not logged");

    // A refusal by policy writes a second line (the denial, at debug): both
    // carry the request id, made here since the caller's is not well formed.
    let (status, rid, lines) = traced(&s, &http, "/metrics", ALICE, Some("req-not-a-uuid")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_ne!(rid, "req-not-a-uuid");
    assert!(rid.starts_with("req-") && uuid::Uuid::parse_str(&rid[4..]).is_ok(), "{rid}");
    assert!(lines.len() >= 2, "the denial and the access line: {lines:#?}");
    assert!(lines.iter().any(|l| l["fields"]["message"] == "policy denies"), "{lines:#?}");
    assert_eq!(access_line(&lines)["fields"]["status"], 403);
    for l in &lines {
        assert_eq!(span_field(l, "request_id"), Some(rid.as_str()), "a line without the request id: {l}");
    }
    s.assert_no_panic();
}

/// The series `docs/metrics.md` lists: the names in its table's first column.
fn documented_series() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md")).unwrap();
    let names: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|n| n.starts_with("berth_"))
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 15, "docs/metrics.md lists the series in a table: {names:?}");
    names
}

/// The value of the series `name{labels}` whose labels include every one of `want`.
fn value(metrics: &str, name: &str, want: &[&str]) -> Option<f64> {
    metrics.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, v) = l.rsplit_once(' ')?;
        let (n, labels) = series.split_once('{').unwrap_or((series, ""));
        (n == name && want.iter().all(|w| labels.contains(w))).then(|| v.parse().ok())?
    })
}

#[tokio::test]
async fn every_documented_series_is_there_from_start_and_requests_count_by_route() {
    let s = Server::start().await;
    let first = s.metrics().await;
    for name in documented_series() {
        let present = first.lines().any(|l| {
            !l.starts_with('#')
                && (l.starts_with(&format!("{name} ")) || l.starts_with(&format!("{name}{{")) || {
                    // A histogram's series are its buckets, sum and count.
                    l.starts_with(&format!("{name}_count"))
                })
        });
        assert!(present, "{name} is documented but not in /metrics right after start:\n{first}");
    }
    assert_eq!(value(&first, "berth_build_info", &[&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))]), Some(1.0));
    assert!(value(&first, "berth_db_pool_max_connections", &[]).unwrap() >= 1.0, "{first}");

    let route = "route=\"/v1/leases/{id}\"";
    let before = value(&first, "berth_http_requests_total", &[route, "status=\"404\""]).unwrap_or(0.0);
    for _ in 0..3 {
        let (status, _) = s.get(&format!("/v1/leases/{}", uuid::Uuid::new_v4()), ALICE).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (status, _) = s.get("/no/such/path/42", ADMIN).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let after = s.metrics().await;
    assert_eq!(
        value(&after, "berth_http_requests_total", &[route, "status=\"404\"", "method=\"GET\""]),
        Some(before + 3.0)
    );
    assert_eq!(value(&after, "berth_http_request_duration_seconds_count", &[route]), Some(3.0), "{after}");
    assert_eq!(value(&after, "berth_http_requests_total", &["route=\"unmatched\"", "status=\"404\""]), Some(1.0));
    assert!(!after.contains("/no/such/path"), "raw paths never become labels");
    // Nor do methods a client makes up: each would be a series kept forever.
    let made_up = reqwest::Method::from_bytes(b"FROBNICATE").unwrap();
    let resp = reqwest::Client::new().request(made_up, format!("{}/v1/leases", s.url)).send().await.unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    let last = s.metrics().await;
    assert!(!last.contains("FROBNICATE"), "made-up methods never become labels:\n{last}");
    assert!(value(&last, "berth_http_requests_total", &["method=\"other\""]).is_some(), "{last}");
}

#[test]
fn the_grafana_dashboard_shows_every_documented_series_and_no_other() {
    let documented = documented_series();
    let json = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/grafana/berth.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&json).unwrap();
    let mut used = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("berth_") {
                    let series = ["_bucket", "_count", "_sum"].iter().fold(word, |w, s| w.strip_suffix(s).unwrap_or(w));
                    assert!(documented.iter().any(|d| d == series), "the dashboard uses {word}, not documented");
                    used.insert(series.to_owned());
                }
            }
        }
    }
    let unused: Vec<_> = documented.iter().filter(|d| !used.contains(*d)).collect();
    assert!(unused.is_empty(), "documented but on no panel: {unused:?}");
}

/// A Placement call at microversion 1.28, as admin; its status and body.
async fn placement(s: &Server, method: reqwest::Method, path: &str, body: Value) -> (StatusCode, Value) {
    s.placement(method, path, ADMIN, "1.28", body).await
}

/// Every claim counts its wait for a lane once, and every batch its time
/// once: what splits a claim's latency into the queue, the transaction and
/// the rest (docs/metrics.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_claim_counts_its_wait_for_a_lane_and_each_batch_its_time() {
    let s = std::sync::Arc::new(server().await);
    let (st, rp) =
        placement(&s, reqwest::Method::POST, "/resource_providers", serde_json::json!({"name": "c-1"})).await;
    assert_eq!(st, StatusCode::OK, "{rp}");
    let rp = rp["uuid"].as_str().unwrap().to_owned();
    let inv = serde_json::json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1000}}});
    let (st, body) = placement(&s, reqwest::Method::PUT, &format!("/resource_providers/{rp}/inventories"), inv).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let before = s.metrics().await;
    let count = |m: &str, name: &str| value(m, name, &[]).unwrap_or_else(|| panic!("{name} in /metrics:\n{m}"));
    assert_eq!(count(&before, "berth_claim_lane_wait_seconds_count"), 0.0, "{before}");

    // Concurrent, so that some wait for a lane and share a batch.
    let claims = 24;
    let tasks: Vec<_> = (0..claims)
        .map(|_| {
            let (s, rp) = (s.clone(), rp.clone());
            tokio::spawn(async move {
                let body = serde_json::json!({"allocations": {rp: {"resources": {"VCPU": 1}}},
                    "project_id": "p1", "user_id": "alice", "consumer_generation": null});
                placement(&s, reqwest::Method::PUT, &format!("/allocations/{}", uuid::Uuid::new_v4()), body).await
            })
        })
        .collect();
    for t in tasks {
        let (st, body) = t.await.unwrap();
        assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    }
    let after = s.metrics().await;
    assert_eq!(count(&after, "berth_claim_lane_wait_seconds_count"), f64::from(claims), "{after}");
    assert_eq!(count(&after, "berth_claim_batch_size_sum"), f64::from(claims), "{after}");
    let batches = count(&after, "berth_claim_batch_size_count");
    assert_eq!(count(&after, "berth_claim_batch_seconds_count"), batches, "{after}");
    // A wait and a transaction take time; each is below the requests' own.
    let waited = count(&after, "berth_claim_lane_wait_seconds_sum");
    let deciding = count(&after, "berth_claim_batch_seconds_sum");
    assert!(deciding > 0.0, "{after}");
    let route = "route=\"/placement/allocations/{consumer}\"";
    let http = value(&after, "berth_http_request_duration_seconds_sum", &[route, "method=\"PUT\""])
        .unwrap_or_else(|| panic!("the PUT route's duration:\n{after}"));
    assert!(waited < http, "waits {waited} s within requests of {http} s");
}
