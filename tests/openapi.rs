//! The OpenAPI document is served and tells the truth: every route it lists
//! is one berthd answers (not the router's "no such route"), and it is
//! valid OpenAPI 3.1. (That every answer matches its schema is `make fuzz`'s
//! check.)

use berth_testkit::Server;
use reqwest::Method;
use serde_json::{json, Value};

/// What the routers answer for a path nobody serves.
fn is_route_miss(status: reqwest::StatusCode, body: &Value) -> bool {
    if status == 405 {
        return true;
    }
    let code = body["code"].as_str().or_else(|| body["error"]["code"].as_str());
    status == 404
        && (code == Some("berth.route_not_found")
            || body["errors"][0]["detail"].as_str() == Some("The resource could not be found."))
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let server = Server::start().await;
    let http = reqwest::Client::new();
    // The misses look like what the test expects them to look like.
    for path in ["/nope", "/v1/nope", "/placement/nope"] {
        let resp = http
            .get(format!("{}{path}", server.url))
            .header("x-auth-token", "admin")
            .header("openstack-api-version", "placement latest")
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
        assert!(is_route_miss(status, &body), "{path}: {status} {body}");
    }
    // The routes as the handlers declare them.
    let routes = berth_api::openapi::routes();
    for (method, template) in &routes {
        let path = template
            .replace("{uuid}", &uuid::Uuid::new_v4().to_string())
            .replace("{consumer_uuid}", &uuid::Uuid::new_v4().to_string())
            .replace("{id}", &uuid::Uuid::new_v4().to_string())
            .replace("{resource_class}", "VCPU")
            .replace("{name}", "CUSTOM_OPENAPI_PROBE");
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = http
            .request(method.clone(), format!("{}{path}", server.url))
            .header("x-auth-token", "admin")
            .header("openstack-api-version", "placement latest");
        if matches!(method.as_str(), "POST" | "PUT" | "PATCH") {
            req = req.json(&json!({}));
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        // A live stream never ends: that it started is the answer.
        if resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream")) {
            assert!(status.is_success(), "{method} {path}: {status}");
            continue;
        }
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
        assert!(!is_route_miss(status, &body), "{method} {template} is documented but not served: {status} {body}");
        assert!(status.as_u16() < 500, "{method} {path} answered {status}: {body}");
    }
    let (status, doc) = server.get("/openapi.json", "admin").await;
    assert_eq!(status, 200);
    assert_eq!(doc["info"]["title"], "Berth");
    let documented: usize =
        doc["paths"].as_object().unwrap().values().map(|item| item.as_object().unwrap().len()).sum();
    assert_eq!(documented, routes.len());
    // Every route berthd serves: a route dropped from the document shows here.
    assert_eq!(documented, 106);
    assert_schemas_are_real(&doc);
    assert_valid_openapi_3_1(&doc);
}

/// Every operation has its error document and, unless it answers nothing,
/// a success schema that names its fields; every body it takes has one too.
fn assert_schemas_are_real(doc: &Value) {
    let schemas = &doc["components"]["schemas"];
    let named = |schema: &Value| -> bool {
        match schema["$ref"].as_str() {
            Some(r) => {
                let target = &schemas[r.trim_start_matches("#/components/schemas/")];
                let has_fields = |t: &Value| {
                    t["properties"].as_object().is_some_and(|p| !p.is_empty()) || t["additionalProperties"].is_object()
                };
                // A schema made of others (a flattened part) names its
                // fields in its parts.
                has_fields(target) || target["allOf"].as_array().is_some_and(|parts| parts.iter().any(has_fields))
            }
            None => schema["type"] == "string" || schema["type"] == "object",
        }
    };
    // An optional body (`oneOf: [null, {...}]`) names its fields in a branch.
    let named = |schema: &Value| -> bool {
        named(schema) || schema["oneOf"].as_array().is_some_and(|branches| branches.iter().any(named))
    };
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            assert!(responses["default"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .is_some_and(|r| r.ends_with("Error")));
            for (status, response) in responses.iter().filter(|(s, _)| s.starts_with('2')) {
                for media in response["content"].as_object().into_iter().flatten().map(|(_, m)| m) {
                    assert!(named(&media["schema"]), "{method} {path} {status}: {media}");
                }
            }
            if let Some(body) = op.get("requestBody") {
                let media = &body["content"]["application/json"];
                assert!(named(&media["schema"]), "{method} {path} body: {body}");
            }
        }
    }
}

/// A Python with openapi-spec-validator: the system's if it has it, else a
/// venv under the target directory; `None` (said loudly) only when the
/// package index cannot be reached.
fn validator() -> Option<std::path::PathBuf> {
    use std::process::Command;
    let has = |python: &std::path::Path| {
        Command::new(python)
            .args(["-c", "import openapi_spec_validator"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    let system = std::path::PathBuf::from(std::env::var("BERTH_PYTHON").unwrap_or_else(|_| "python3".into()));
    if has(&system) {
        return Some(system);
    }
    let dir = berth_testkit::target_dir().join("openapi-venv");
    let python = dir.join("bin/python");
    if python.exists() && has(&python) {
        return Some(python);
    }
    let made = Command::new(&system).args(["-m", "venv", "--clear"]).arg(&dir).status().expect("python3 -m venv");
    assert!(made.success(), "python3 -m venv {} failed", dir.display());
    let out = Command::new(dir.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "openapi-spec-validator"])
        .output()
        .expect("run pip");
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr);
        if text.contains("NewConnectionError") || text.contains("No matching distribution") {
            eprintln!("\n*** SKIPPED the OpenAPI validation: the package index is unreachable ***\n{text}");
            return None;
        }
        panic!("pip install openapi-spec-validator failed:\n{text}");
    }
    Some(python)
}

/// openapi-spec-validator finds no error in `doc` as OpenAPI 3.1.
fn assert_valid_openapi_3_1(doc: &Value) {
    assert_eq!(doc["openapi"], "3.1.0");
    let Some(python) = validator() else { return };
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, doc.to_string().as_bytes()).unwrap();
    let script = "import json, sys\n\
        from openapi_spec_validator.validation.validators import OpenAPIV31SpecValidator\n\
        errors = list(OpenAPIV31SpecValidator(json.load(open(sys.argv[1]))).iter_errors())\n\
        for e in errors[:20]: print(e.message[:300])\n\
        sys.exit(1 if errors else 0)\n";
    let out = std::process::Command::new(python).args(["-c", script]).arg(file.path()).output().unwrap();
    assert!(
        out.status.success(),
        "/openapi.json is not valid OpenAPI 3.1:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One answer of berthd: what was asked, at which Placement microversion,
/// and what came back.
struct Answer {
    method: &'static str,
    template: &'static str,
    version: &'static str,
    status: u16,
    body: Value,
}

/// Records real answers on real data, to check against the document.
struct Recorder<'s> {
    server: &'s Server,
    http: reqwest::Client,
    answers: Vec<Answer>,
}

impl Recorder<'_> {
    /// `path` is `template` filled in; the answer's body, if JSON.
    async fn call(
        &mut self,
        method: &'static str,
        template: &'static str,
        path: &str,
        token: &str,
        version: &'static str,
        body: Option<Value>,
    ) -> Value {
        let mut req = self
            .http
            .request(Method::from_bytes(method.as_bytes()).unwrap(), format!("{}{path}", self.server.url))
            .header("x-auth-token", token)
            .header("openstack-api-version", format!("placement {version}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
        self.answers.push(Answer { method, template, version, status, body: body.clone() });
        body
    }
}

/// Placement microversions whose answers differ in shape.
const VERSIONS: &[&str] = &["1.0", "1.2", "1.12", "1.14", "1.17", "1.20", "1.29", "1.34", "latest"];

const ADMIN: &str = "admin";
const ALICE: &str = "alice:p1";

/// What the data made for the reads is called.
struct Made {
    host_id: String,
    rp: String,
    child: String,
    allocations: String,
    lease_at: String,
}

#[tokio::test]
async fn real_answers_match_their_schemas() {
    let server = Server::start().await;
    let mut r = Recorder { server: &server, http: reqwest::Client::new(), answers: Vec::new() };
    let made = make_data(&mut r).await;
    read_placement(&mut r, &made).await;
    read_the_rest(&mut r, &made).await;
    r.call("DELETE", "/v1/quotas/projects/{project_id}", "/v1/quotas/projects/p1", ADMIN, "latest", None).await;
    let answers = std::mem::take(&mut r.answers);
    // The data was made: the writes that made it succeeded.
    let failed: Vec<String> = answers
        .iter()
        .filter(|a| a.version == "latest" && a.status >= 400)
        .map(|a| format!("{} {} {}: {}", a.method, a.template, a.status, a.body))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let (_, doc) = server.get("/openapi.json", "admin").await;
    assert_answers_match(&doc, &answers);
}

/// Data: a host (a provider with inventory) with a capability, a trait and
/// an aggregate; a consumer of p1 on it; a lease of alice's that holds it;
/// a custom class; a quota.
async fn make_data(r: &mut Recorder<'_>) -> Made {
    let host = json!({"name": "oa-host", "vcpus": 16, "memory_mb": 32768, "local_gb": 100, "gpu": "true"});
    let host = r.call("POST", "/v1/os-hosts", "/v1/os-hosts", ADMIN, "latest", Some(host)).await;
    let host_id = host["host"]["id"].as_str().expect("a host").to_string();
    let rps = "/placement/resource_providers";
    let found = r.call("GET", rps, &format!("{rps}?name=oa-host"), ADMIN, "latest", None).await;
    let rp = found["resource_providers"][0]["uuid"].as_str().unwrap_or_else(|| panic!("{host} {found}")).to_string();
    // The consumer sits on a child provider: the host stays free to lease.
    let child = json!({"name": "oa-child", "parent_provider_uuid": rp});
    let child = r.call("POST", rps, rps, ADMIN, "latest", Some(child)).await;
    let child = child["uuid"].as_str().unwrap_or_else(|| panic!("{child}")).to_string();
    let inventory = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}});
    let child_inventories = format!("{rps}/{child}/inventories");
    r.call(
        "PUT",
        "/placement/resource_providers/{uuid}/inventories",
        &child_inventories,
        ADMIN,
        "latest",
        Some(inventory),
    )
    .await;
    r.call("PUT", "/placement/traits/{name}", "/placement/traits/CUSTOM_OA", ADMIN, "latest", None).await;
    let at = |suffix: &str| format!("{rps}/{rp}{suffix}");
    let gen = r.call("GET", "/placement/resource_providers/{uuid}", &at(""), ADMIN, "latest", None).await;
    let g = gen["generation"].as_i64().expect("a generation");
    let traits = json!({"resource_provider_generation": g, "traits": ["CUSTOM_OA"]});
    r.call("PUT", "/placement/resource_providers/{uuid}/traits", &at("/traits"), ADMIN, "latest", Some(traits)).await;
    let aggs = json!({"resource_provider_generation": g + 1, "aggregates": [uuid::Uuid::new_v4()]});
    r.call("PUT", "/placement/resource_providers/{uuid}/aggregates", &at("/aggregates"), ADMIN, "latest", Some(aggs))
        .await;
    let consumer = uuid::Uuid::new_v4();
    let claim = json!({"allocations": {child.clone(): {"resources": {"VCPU": 1}}}, "project_id": "p1",
        "user_id": "alice", "consumer_generation": null, "consumer_type": "INSTANCE"});
    let allocations = format!("/placement/allocations/{consumer}");
    r.call("PUT", "/placement/allocations/{consumer_uuid}", &allocations, ADMIN, "latest", Some(claim)).await;
    let classes = "/placement/resource_classes";
    r.call("POST", classes, classes, ADMIN, "latest", Some(json!({"name": "CUSTOM_OA_CLASS"}))).await;
    let lease_at = make_leases(r).await;
    Made { host_id, rp, child, allocations, lease_at }
}

/// Leases (one, and a weekly recurrence with its dry run), a quota, advice
/// and a private capability; the one lease's path.
async fn make_leases(r: &mut Recorder<'_>) -> String {
    let lease = json!({"name": "oa-lease", "start_date": "2031-01-01 00:00", "end_date": "2031-01-02 00:00",
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let lease = r.call("POST", "/v1/leases", "/v1/leases", ALICE, "latest", Some(lease)).await;
    let lease_id = lease["lease"]["id"].as_str().unwrap_or_else(|| panic!("{lease}")).to_string();
    let recurring = json!({"name": "oa-weekly", "start_date": "2031-01-01 00:00", "reservations": [{"resource_type": "virtual:instance",
        "amount": 1, "vcpus": 1, "memory_mb": 512, "disk_gb": 1}],
        "recurrence": {"cron": "0 9 * * 1", "duration": "1h", "until": "2031-03-01 00:00"}});
    let mut dry = recurring.clone();
    dry["dry_run"] = json!(true);
    r.call("POST", "/v1/leases", "/v1/leases", ALICE, "latest", Some(dry)).await;
    r.call("POST", "/v1/leases", "/v1/leases", ALICE, "latest", Some(recurring)).await;
    let lease_at = format!("/v1/leases/{lease_id}");
    r.call("PUT", "/v1/leases/{id}", &lease_at, ALICE, "latest", Some(json!({"name": "oa-renamed"}))).await;
    let quota = json!({"quotas": {"VCPU": 64, "leases": 1}});
    r.call("PUT", "/v1/quotas/projects/{project_id}", "/v1/quotas/projects/p1", ADMIN, "latest", Some(quota)).await;
    let advice = json!({"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}], "duration": "1h"});
    r.call("POST", "/v1/availability", "/v1/availability", ALICE, "latest", Some(advice)).await;
    let asked = json!({"reservations": [{"resource_type": "physical:host", "min": 1, "max": 2}],
        "duration": {"min": "1h", "max": "4h"}, "limit": 2, "order": "longest"});
    r.call("POST", "/v1/offers", "/v1/offers", ALICE, "latest", Some(asked)).await;
    let property = "/v1/os-hosts/properties/{name}";
    r.call("PATCH", property, "/v1/os-hosts/properties/gpu", ADMIN, "latest", Some(json!({"private": true}))).await;

    lease_at
}

/// Every Placement read, on that data, at each microversion.
async fn read_placement(r: &mut Recorder<'_>, made: &Made) {
    let Made { rp, child, allocations, .. } = made;
    let rps = "/placement/resource_providers";
    let classes = "/placement/resource_classes";
    let at = |suffix: &str| format!("{rps}/{rp}{suffix}");
    let inventory = at("/inventories/VCPU");
    let placement_reads: Vec<(&'static str, String)> = vec![
        ("/placement/", "/placement/".into()),
        (rps, rps.into()),
        ("/placement/resource_providers/{uuid}", at("")),
        ("/placement/resource_providers/{uuid}/inventories", at("/inventories")),
        ("/placement/resource_providers/{uuid}/inventories/{resource_class}", inventory),
        ("/placement/resource_providers/{uuid}/usages", at("/usages")),
        ("/placement/resource_providers/{uuid}/allocations", format!("{rps}/{child}/allocations")),
        ("/placement/resource_providers/{uuid}/usages", format!("{rps}/{child}/usages")),
        ("/placement/resource_providers/{uuid}/traits", at("/traits")),
        ("/placement/resource_providers/{uuid}/aggregates", at("/aggregates")),
        (classes, classes.into()),
        ("/placement/resource_classes/{name}", format!("{classes}/CUSTOM_OA_CLASS")),
        ("/placement/traits", "/placement/traits?associated=true".into()),
        ("/placement/allocations/{consumer_uuid}", allocations.clone()),
        ("/placement/usages", "/placement/usages?project_id=p1".into()),
        ("/placement/allocation_candidates", "/placement/allocation_candidates?resources=VCPU:1".into()),
    ];
    for version in VERSIONS {
        for (template, path) in &placement_reads {
            r.call("GET", template, path, ADMIN, version, None).await;
        }
    }
}

/// Every other read, on that data.
async fn read_the_rest(r: &mut Recorder<'_>, made: &Made) {
    let Made { host_id, lease_at, .. } = made;
    let reads: Vec<(&'static str, String, &str)> = vec![
        ("/", "/".into(), ADMIN),
        ("/readyz", "/readyz".into(), ADMIN),
        ("/v1/leases", "/v1/leases?limit=1".into(), ADMIN),
        ("/v1/leases/{id}", lease_at.clone(), ALICE),
        ("/v1/leases/{id}/extension", format!("{lease_at}/extension"), ALICE),
        ("/v1/leases/{id}/events", format!("{lease_at}/events"), ALICE),
        ("/v1/events", "/v1/events?limit=1".into(), ADMIN),
        ("/v1/os-hosts", "/v1/os-hosts?limit=1".into(), ADMIN),
        ("/v1/os-hosts/{id}", format!("/v1/os-hosts/{host_id}"), ADMIN),
        ("/v1/os-hosts/allocations", "/v1/os-hosts/allocations".into(), ADMIN),
        ("/v1/os-hosts/{id}/allocation", format!("/v1/os-hosts/{host_id}/allocation"), ADMIN),
        ("/v1/os-hosts/properties", "/v1/os-hosts/properties?detail=true&all=true".into(), ADMIN),
        ("/v1/os-hosts/properties", "/v1/os-hosts/properties".into(), ADMIN),
        ("/v1/log", "/v1/log?limit=5".into(), ADMIN),
        ("/v1/quotas/defaults", "/v1/quotas/defaults".into(), ALICE),
        ("/v1/plugins", "/v1/plugins".into(), ALICE),
        ("/v1/plugins/schema", "/v1/plugins/schema".into(), ALICE),
        ("/v1/quotas/projects/{project_id}", "/v1/quotas/projects/p1".into(), ALICE),
        ("/v1/quotas/projects/{project_id}/usage", "/v1/quotas/projects/p1/usage".into(), ALICE),
        (
            "/v1/quotas/projects/{project_id}/users/{user_id}/usage",
            "/v1/quotas/projects/p1/users/alice/usage".into(),
            ALICE,
        ),
        // The console's: a calendar with another project's bars redacted, and one with every name.
        ("/v1/calendar", "/v1/calendar?start=2031-01-01 00:00&end=2031-02-01 00:00".into(), "bob:p2"),
        ("/v1/calendar", "/v1/calendar?start=2031-01-01 00:00&end=2031-02-01 00:00".into(), ADMIN),
        ("/v1/whoami", "/v1/whoami".into(), ALICE),
        ("/v1/login", "/v1/login".into(), ADMIN),
    ];
    for (template, path, token) in &reads {
        r.call("GET", template, path, token, "latest", None).await;
    }
    // Operators' controls: the manager, and a lease event cancelled.
    r.call("GET", "/v1/manager", "/v1/manager", ADMIN, "latest", None).await;
    r.call("PUT", "/v1/manager", "/v1/manager", ADMIN, "latest", Some(json!({"paused": false}))).await;
    let of_lease = format!("{lease_at}/events?event_type=before_end_lease");
    let events = r.call("GET", "/v1/leases/{id}/events", &of_lease, ADMIN, "latest", None).await;
    let event = events["events"][0]["id"].as_str().expect("a lease event");
    r.call("POST", "/v1/events/{id}/cancel", &format!("/v1/events/{event}/cancel"), ADMIN, "latest", None).await;
}

/// Each answer matches the schema the document gives its route and status
/// (the `default` one, the error document, where its status is not named).
fn assert_answers_match(doc: &Value, answers: &[Answer]) {
    let Some(python) = validator() else { return };
    let cases: Vec<Value> = answers
        .iter()
        .map(|a| {
            let responses = &doc["paths"][a.template][a.method.to_lowercase()]["responses"];
            assert!(responses.is_object(), "{} {} is not documented", a.method, a.template);
            let response = responses.get(a.status.to_string()).unwrap_or(&responses["default"]);
            let schema = &response["content"]["application/json"]["schema"];
            let name = format!("{} {} at {} answered {}", a.method, a.template, a.version, a.status);
            json!({"name": name, "schema": schema, "body": a.body, "bodiless": response.get("content").is_none()})
        })
        .collect();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let input = json!({"components": doc["components"], "cases": cases});
    std::io::Write::write_all(&mut file, input.to_string().as_bytes()).unwrap();
    let script = "import json, sys\n\
        from jsonschema import Draft202012Validator\n\
        data = json.load(open(sys.argv[1]))\n\
        bad = 0\n\
        for case in data['cases']:\n\
        \x20   if case['bodiless']:\n\
        \x20       if case['body'] is not None: print(case['name'], 'has a body it does not document'); bad += 1\n\
        \x20       continue\n\
        \x20   schema = dict(case['schema'], components=data['components'])\n\
        \x20   for e in Draft202012Validator(schema).iter_errors(case['body']):\n\
        \x20       bad += 1; print(case['name'], list(e.absolute_path), e.message[:300])\n\
        print(len(data['cases']), 'answers checked')\n\
        sys.exit(1 if bad else 0)\n";
    let out = std::process::Command::new(python).args(["-c", script]).arg(file.path()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "answers that do not match their schemas:\n{text}");
    eprintln!("{text}");
}
