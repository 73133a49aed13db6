//! `GET /v1/plugins` (the enabled resource types, as Blazar lists its
//! plugins, with their drivers and parameters) and `GET /v1/plugins/schema`
//! (the protocol, the document berth-plugins checks answers with).

use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

const CONFIG: &str = r#"
[plugins]
enabled = ["physical:host", "virtual:floatingip"]

[plugins.drivers."physical:host"]
driver = "webhook"
url = "http://127.0.0.1:9/hosts"

[plugins.external."virtual:floatingip"]
driver = "exec"
program = "/bin/true"

[plugins.external."virtual:spare"]
driver = "noop"
"#;

#[tokio::test]
async fn the_enabled_types_are_listed_with_their_drivers_and_parameters() {
    let s = Server::start_with_config(Some(CONFIG)).await;
    let (st, body) = s.get("/v1/plugins", ALICE).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let plugins = body["plugins"].as_array().unwrap();
    let names: Vec<&str> = plugins.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["physical:host", "virtual:floatingip"], "enabled ones only");
    let host = &plugins[0];
    assert_eq!(host["resource_type"], "physical:host");
    assert_eq!(host["driver"], "webhook");
    assert_eq!(host["external"], false);
    let params = host["parameters"].as_array().unwrap();
    assert!(params.contains(&json!({"name": "min", "type": "integer"})), "{host}");
    assert!(params.contains(&json!({"name": "hypervisor_properties", "type": "query"})), "{host}");
    let ip = &plugins[1];
    assert_eq!(ip["driver"], "exec");
    assert_eq!(ip["external"], true);
    assert_eq!(ip["parameters"], Value::Null, "an external plugin checks its own parameters");
    // Nothing of the driver's settings (URLs, secrets) is shown.
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");
}

#[tokio::test]
async fn the_schema_is_the_one_answers_are_checked_with() {
    let s = Server::start().await;
    let (st, body) = s.get("/v1/plugins/schema", ALICE).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let own: Value = serde_json::from_str(include_str!("../crates/berth-plugins/schema/protocol.json")).unwrap();
    assert_eq!(body, own);
    assert!(body["$defs"]["validate_answer"]["oneOf"].is_array());
    let (st, _) = s.get("/v1/plugins", ADMIN).await;
    assert_eq!(st, StatusCode::OK);
}
