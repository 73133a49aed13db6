//! The OpenAPI document is served and tells the truth: every route it lists
//! is one berthd answers (not the router's "no such route"), and it is
//! valid OpenAPI 3.1. (That every answer matches its schema is `make fuzz`'s
//! check.)

mod common;

use common::Server;
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
    assert_eq!(documented, 79);
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
                target["properties"].as_object().is_some_and(|p| !p.is_empty())
                    || target["additionalProperties"].is_object()
            }
            None => schema["type"] == "string" || schema["type"] == "object",
        }
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
    let dir = common::target_dir().join("openapi-venv");
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
