//! Sharing, handing over and lending in the console: the owner shares a
//! lease with a project (a declined confirmation shares nothing) and offers
//! it to another; the project it is shared with sees it under "Shared with
//! your project", without its owner's name, project or user; an admin sees
//! what is lent on the hosts page, and when it is reclaimed.

use berth_testkit::BOB;
use reqwest::StatusCode;
use serde_json::json;

use super::browser::Said;
use super::{enrol_as, host_lease, Browser, Mode, World};

#[tokio::test(flavor = "multi_thread")]
async fn an_owner_shares_and_offers_a_lease_and_the_shared_project_sees_it() {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(Mode::Noauth).await;
    let s = &w.s;
    enrol_as(s, &w.admin, "h-one").await;
    let l = host_lease(s, &w.alice, "to-share", "2031-03-04 09:00", "2031-03-04 12:00", "h-one").await;
    let id = l["id"].as_str().unwrap();
    let args = json!({"login": w.alice_login, "lease": id, "share": "p2", "offer": "p3"});
    let mut drive = browser.drive(&s.url, "share_flow", &args);
    match drive.next().await {
        Said::Ask(a) => assert_eq!(a, "declined"),
        Said::Done { result, .. } => panic!("nothing asked: {result}"),
    }
    let (st, shown) = s.get(&format!("/v1/leases/{id}"), &w.admin).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(shown["lease"]["shared_with"], json!([]), "a declined share shared: {shown}");
    drive.answer(&json!({})).await;
    let out = drive.result().await;
    assert!(out["asked"].as_str().unwrap().contains("p2"), "{out}");
    assert!(out["pending"].as_str().unwrap().contains("p3"), "{out}");
    let (_, shown) = s.get(&format!("/v1/leases/{id}"), &w.admin).await;
    assert_eq!(shown["lease"]["shared_with"], json!(["p2"]), "{shown}");
    assert_eq!(shown["lease"]["transfer"]["to_project"], "p3", "{shown}");

    let out = browser.drive(&s.url, "shared_list", &json!({"login": BOB})).result().await;
    let rows: Vec<String> = out["rows"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect();
    let row = rows.iter().find(|r| r.contains(&id[..8])).unwrap_or_else(|| panic!("not listed: {rows:?}"));
    assert!(!row.contains("to-share") && !row.contains("p1") && !row.contains("alice"), "{row}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_sees_what_is_lent_and_when_it_is_reclaimed() {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(Mode::Noauth).await;
    let s = &w.s;
    let host = enrol_as(s, &w.admin, "h-lent").await;
    host_lease(s, &w.alice, "later", "2031-03-04 09:00", "2031-03-04 12:00", "h-lent").await;
    let server = uuid::Uuid::new_v4();
    let body = json!({"allocations": {&host: {"resources": {"VCPU": 2}}}, "project_id": "p2", "user_id": "bob",
                      "consumer_generation": null, "consumer_type": "PREEMPTIBLE"});
    let (st, answer) =
        s.placement(reqwest::Method::PUT, &format!("/allocations/{server}"), &w.admin, "1.38", body).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{answer}");
    let out = browser.drive(&s.url, "loans_list", &json!({"login": w.admin_login})).result().await;
    let rows: Vec<String> = out["rows"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect();
    let row =
        rows.iter().find(|r| r.contains(&server.to_string()[..8])).unwrap_or_else(|| panic!("not listed: {rows:?}"));
    assert!(
        row.contains("h-lent") && row.contains("VCPU 2") && row.contains("2031-03-04") && row.contains("PENDING"),
        "{row}"
    );
    s.assert_no_panic();
}
