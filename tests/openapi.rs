//! The OpenAPI document is served and tells the truth: every route it lists
//! is one berthd answers (not the router's "no such route").

mod common;

use berth_api::openapi::ROUTES;
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
    for route in ROUTES {
        let path = route
            .path
            .replace("{uuid}", &uuid::Uuid::new_v4().to_string())
            .replace("{consumer_uuid}", &uuid::Uuid::new_v4().to_string())
            .replace("{id}", &uuid::Uuid::new_v4().to_string())
            .replace("{resource_class}", "VCPU")
            .replace("{name}", "CUSTOM_OPENAPI_PROBE");
        let method = Method::from_bytes(route.method.as_bytes()).unwrap();
        let mut req = http
            .request(method.clone(), format!("{}{path}", server.url))
            .header("x-auth-token", "admin")
            .header("openstack-api-version", "placement latest");
        if matches!(route.method, "POST" | "PUT" | "PATCH") {
            req = req.json(&json!({}));
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        // A live stream never ends: that it started is the answer.
        if resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream")) {
            assert!(status.is_success(), "{} {path}: {status}", route.method);
            continue;
        }
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
        assert!(
            !is_route_miss(status, &body),
            "{} {} is documented but not served: {status} {body}",
            route.method,
            route.path
        );
        assert!(status.as_u16() < 500, "{} {path} answered {status}: {body}", route.method);
    }
    let (status, doc) = server.get("/openapi.json", "admin").await;
    assert_eq!(status, 200);
    assert_eq!(doc["info"]["title"], "Berth");
    let documented: usize =
        doc["paths"].as_object().unwrap().values().map(|item| item.as_object().unwrap().len()).sum();
    assert_eq!(documented, ROUTES.len());
}
