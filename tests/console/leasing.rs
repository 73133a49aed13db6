//! Leases from the console, for real, in noauth and in keystone mode: a
//! member makes one through the form (after the availability advice), moves
//! its end later and earlier, and deletes it, each only once confirmed (a
//! declined confirmation changes nothing), and sees none of the admin's
//! controls; an admin sees them, and a declined End now, Cancel or Fire now
//! changes nothing.

use berth_testkit::Server;
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::browser::Said;
use super::{enrol_as, host_lease, Browser, Mode, World};

/// The leases named `name` that `token` sees.
async fn named(s: &Server, token: &str, name: &str) -> Vec<Value> {
    let (st, all) = s.get("/v1/leases?limit=1000", token).await;
    assert_eq!(st, StatusCode::OK, "{all}");
    all["leases"].as_array().unwrap().iter().filter(|l| l["name"] == name).cloned().collect()
}

async fn lease(s: &Server, token: &str, id: &str) -> (StatusCode, Value) {
    s.get(&format!("/v1/leases/{id}"), token).await
}

/// The names of the hosts a lease holds, through the hosts' allocations.
async fn hosts_of(s: &Server, admin: &str, id: &str, names: &[(&str, &str)]) -> Vec<String> {
    let (st, all) = s.get(&format!("/v1/os-hosts/allocations?lease_id={id}"), admin).await;
    assert_eq!(st, StatusCode::OK, "{all}");
    // Every host is listed; those holding the lease list its reservation.
    let ids: Vec<&str> = all["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["reservations"].as_array().is_some_and(|r| !r.is_empty()))
        .map(|a| a["resource_id"].as_str().unwrap())
        .collect();
    names.iter().filter(|(_, i)| ids.contains(i)).map(|(n, _)| n.to_string()).collect()
}

/// What the lease is after each step of the member's scenario; `id` is
/// found once it is made.
async fn check_step(w: &World, step: &str, name: &str, hosts: &[(&str, &str)], id: &mut String) {
    let s = &w.s;
    if step == "refused" || step == "not_confirmed" {
        // A refused or a declined creation makes nothing.
        assert!(named(s, &w.admin, name).await.is_empty(), "{step}");
        return;
    }
    if step == "created" {
        *id = named(s, &w.alice, name).await[0]["id"].as_str().unwrap().to_string();
        assert_eq!(hosts_of(s, &w.admin, id, hosts).await, ["h-two"], "the form's host");
    }
    let (st, l) = lease(s, &w.admin, id).await;
    if step == "deleted" {
        assert_eq!(st, StatusCode::NOT_FOUND, "deleted, yet {l}");
        return;
    }
    assert_eq!(st, StatusCode::OK, "{step}: {l}");
    let want_end = match step {
        "created" | "prolong_kept" => "2031-03-04T12:00",
        "prolonged" => "2031-03-04T15:00",
        _ => "2031-03-04T11:00", // shortened, then kept when the delete is declined
    };
    let l = &l["lease"];
    assert!(l["start_date"].as_str().unwrap().starts_with("2031-03-04T09:00"), "{step}: {l}");
    assert!(l["end_date"].as_str().unwrap().starts_with(want_end), "{step}: want end {want_end}: {l}");
    let (_, me) = s.get("/v1/whoami", &w.alice).await;
    assert_eq!(l["project_id"], me["whoami"]["project_id"], "{l}");
}

async fn a_member_makes_changes_and_deletes_a_lease(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    let s = &w.s;
    let h1 = enrol_as(s, &w.admin, "h-one").await;
    let h2 = enrol_as(s, &w.admin, "h-two").await;
    let hosts = [("h-one", h1.as_str()), ("h-two", h2.as_str())];
    let name = "form-made";
    let args = json!({"login": w.alice_login, "name": name, "host": "h-two", "host_id": h1,
        "start": "2031-03-04T09:00", "end": "2031-03-04T12:00",
        "later": "2031-03-04T15:00", "earlier": "2031-03-04T11:00"});
    let mut drive = browser.drive(&s.url, "lease_flow", &args);
    let mut id = String::new();
    let out = loop {
        match drive.next().await {
            Said::Ask(a) => {
                check_step(&w, a.as_str().unwrap(), name, &hosts, &mut id).await;
                drive.answer(&json!({})).await;
            }
            Said::Done { result, errors } => {
                assert!(errors.is_empty(), "the page's script failed: {errors:?}");
                break result;
            }
        }
    };
    assert!(!id.is_empty(), "no lease was made: {out}");
    // Bad input reached the API, and the form shows its message.
    assert!(out["refused"].as_str().unwrap().starts_with("400"), "{out}");
    assert!(out["advice"].as_str().unwrap().contains("fits as asked"), "{out}");
    assert_eq!(out["advice_asks"], 1, "the check asked more than once: {out}");
    for k in ["create_asked", "prolong_kept_asked", "prolonged_asked", "shortened_asked", "delete_asked"] {
        assert!(out[k].as_str().unwrap().contains(name), "{k}: {out}");
    }
    assert!(out["prolonged_asked"].as_str().unwrap().starts_with("Prolong"), "{out}");
    assert!(out["shortened_asked"].as_str().unwrap().starts_with("Shorten"), "{out}");
    // A member's controls: change and delete, none of the admin's.
    assert_eq!(
        out["controls"],
        json!({"lease-end": false, "lease-recover": false, "lease-delete": true, "lease-change": true}),
        "{out}"
    );
    assert_eq!(out["nav"], json!(["calendar", "leases", "new", "manager", "quotas"]), "{out}");
    assert_eq!(out["manager_label"], "Events", "{out}");
    assert_eq!(out["host_links"], 0, "host links for a member: {out}");
    assert_eq!(out["host_page_shown"], false, "the host page opened for a member: {out}");
    assert_eq!(out["manager_buttons"], 0, "manager buttons for a member: {out}");
    assert_eq!(out["manager_panel"], false, "{out}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_makes_changes_and_deletes_a_lease_noauth() {
    a_member_makes_changes_and_deletes_a_lease(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_makes_changes_and_deletes_a_lease_keystone() {
    a_member_makes_changes_and_deletes_a_lease(Mode::Keystone).await;
}

async fn an_admin_sees_the_controls_and_a_declined_one_changes_nothing(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    let s = &w.s;
    enrol_as(s, &w.admin, "h-one").await;
    let l = host_lease(s, &w.alice, "to-keep", "2031-03-04 09:00", "2031-03-04 12:00", "h-one").await;
    let id = l["id"].as_str().unwrap();
    let (_, events) = s.get(&format!("/v1/leases/{id}/events?event_type=start_lease"), &w.admin).await;
    let event = events["events"][0]["id"].as_str().unwrap().to_string();
    let (_, all) = s.get("/v1/events?status=UNDONE&limit=200", &w.admin).await;
    let waiting = all["events"].as_array().unwrap().len();
    let args = json!({"login": w.admin_login, "lease": id, "event": event});
    let mut drive = browser.drive(&s.url, "admin_controls", &args);
    match drive.next().await {
        Said::Ask(a) => assert_eq!(a, "declined"),
        Said::Done { result, .. } => panic!("nothing asked: {result}"),
    }
    let (_, after) = lease(s, &w.admin, id).await;
    assert_eq!(after["lease"]["status"], "PENDING", "{after}");
    assert_eq!(after["lease"]["end_date"], l["end_date"], "{after}");
    let (_, e) = s.get(&format!("/v1/leases/{id}/events?event_type=start_lease"), &w.admin).await;
    assert_eq!(e["events"][0]["status"], "UNDONE", "a declined Cancel or Fire now acted: {e}");
    drive.answer(&json!({})).await;
    let out = drive.result().await;
    // "Take out of ERROR" only for a lease in ERROR.
    assert_eq!(
        out["controls"],
        json!({"lease-end": true, "lease-recover": false, "lease-delete": true, "lease-change": true}),
        "{out}"
    );
    assert_eq!(out["nav"], json!(["calendar", "leases", "new", "hosts", "log", "manager", "quotas"]), "{out}");
    assert_eq!(out["manager_label"], "Manager", "{out}");
    assert_eq!(out["fire_shown"], true, "{out}");
    for k in ["end_asked", "cancel_asked", "fire_asked"] {
        assert!(out[k].as_str().unwrap().contains("to-keep"), "{k}: {out}");
    }
    // Every waiting event counted, not only those already due.
    assert!(out["summary"].as_str().unwrap().contains(&format!("waiting {waiting} (due now 0)")), "{out}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_sees_the_controls_and_a_declined_one_changes_nothing_noauth() {
    an_admin_sees_the_controls_and_a_declined_one_changes_nothing(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_sees_the_controls_and_a_declined_one_changes_nothing_keystone() {
    an_admin_sees_the_controls_and_a_declined_one_changes_nothing(Mode::Keystone).await;
}
