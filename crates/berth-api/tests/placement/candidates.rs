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
