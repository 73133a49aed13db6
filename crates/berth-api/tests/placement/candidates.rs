//! Large allocation candidate answers, written as the search walks.

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::Api;
use berth_api::ApiConfig;

/// Placement bug 2070257's case: a node with 8 children and six isolated
/// groups has 8·7·6·5·4·3 candidates. The answer (some 14 MB, written in
/// many chunks as the search walks) holds each once, with its summaries;
/// `max_allocation_candidates` bounds it whatever `limit` says.
#[tokio::test]
async fn a_large_candidates_answer_is_whole_and_bounded_by_the_setting() {
    let api = Api::start_with(ApiConfig { max_allocation_candidates: 25_000, ..ApiConfig::default() }).await;
    let cn = api.provider("cn", None).await;
    for i in 0..8 {
        let pf = api.provider(&format!("cn-pf{i}"), Some(cn)).await;
        api.inventory(pf, json!({"SRIOV_NET_VF": {"total": 8}})).await;
    }
    let groups: Vec<String> = (1..=6).map(|g| format!("resources{g}=SRIOV_NET_VF:1")).collect();
    let q = format!("/allocation_candidates?{}&group_policy=isolate", groups.join("&"));
    let c = api.admin(Method::GET, &q, None).await;
    assert_eq!(c.status, StatusCode::OK);
    let reqs = c.body["allocation_requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 20_160);
    let distinct: std::collections::BTreeSet<String> = reqs.iter().map(|r| r["mappings"].to_string()).collect();
    assert_eq!(distinct.len(), 20_160, "no candidate twice");
    assert_eq!(c.body["provider_summaries"].as_object().unwrap().len(), 9, "the whole tree");

    let bounded = Api::start_with(ApiConfig { max_allocation_candidates: 100, ..ApiConfig::default() }).await;
    let cn = bounded.provider("cn", None).await;
    for i in 0..8 {
        let pf = bounded.provider(&format!("cn-pf{i}"), Some(cn)).await;
        bounded.inventory(pf, json!({"SRIOV_NET_VF": {"total": 8}})).await;
    }
    let c = bounded.admin(Method::GET, &q, None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 100);
    let c = bounded.admin(Method::GET, &format!("{q}&limit=5000"), None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 100, "the setting bounds limit too");
    let c = bounded.admin(Method::GET, &format!("{q}&limit=7"), None).await;
    assert_eq!(c.body["allocation_requests"].as_array().unwrap().len(), 7);
}

/// The request timeout ends with the handler, so the streamed answer keeps
/// its own deadline: a client that stops reading a large answer does not
/// hold the walk (a blocking thread) past it, and gets a broken body, never
/// a well-formed partial one. Without the deadline, the body arrives whole
/// once the client reads again.
#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_at_the_request_timeout() {
    let api = Api::start_with(ApiConfig { request_timeout_s: 1, ..ApiConfig::default() }).await;
    let cn = api.provider("cn", None).await;
    for i in 0..8 {
        let pf = api.provider(&format!("cn-pf{i}"), Some(cn)).await;
        api.inventory(pf, json!({"SRIOV_NET_VF": {"total": 8}})).await;
    }
    // 8·7·6·5·4·3·2 = 40,320 candidates, some 28 MB: more than loopback's
    // socket buffers hold, so the walk must wait for the reader.
    let groups: Vec<String> = (1..=7).map(|g| format!("resources{g}=SRIOV_NET_VF:1")).collect();
    let q = format!("/allocation_candidates?{}&group_policy=isolate", groups.join("&"));
    let resp = api
        .http
        .get(format!("{}{q}", api.base))
        .header("openstack-api-version", "placement 1.39")
        .header("x-auth-token", "admin")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "the answer starts within the timeout");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    match resp.bytes().await {
        Err(_) => {}
        Ok(body) => {
            let parsed = serde_json::from_slice::<serde_json::Value>(&body);
            assert!(
                parsed.is_err(),
                "a stalled client must not get the whole answer ({} bytes) after the timeout",
                body.len()
            );
        }
    }
}
