//! Offers and local time in the console, in noauth and in keystone mode: a
//! member whose window does not fit books one of the offers the form lists
//! (exactly it: its window and host count), and a second booking of the
//! same offer is refused as taken and makes nothing; with the zone setting
//! on in a browser in Paris, a lease's dates show in Paris time and a lease
//! made from the form at 10:00 Paris is stored at 09:00 UTC.

use berth_testkit::Server;
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::browser::Said;
use super::{enrol_as, host_lease, Browser, Mode, World};

/// The leases named `name` that the admin sees.
async fn named(s: &Server, admin: &str, name: &str) -> Vec<Value> {
    let (st, all) = s.get("/v1/leases?limit=1000", admin).await;
    assert_eq!(st, StatusCode::OK, "{all}");
    all["leases"].as_array().unwrap().iter().filter(|l| l["name"] == name).cloned().collect()
}

/// How many hosts hold the lease, through the hosts' allocations.
async fn hosts_held(s: &Server, admin: &str, id: &str) -> usize {
    let (st, all) = s.get(&format!("/v1/os-hosts/allocations?lease_id={id}"), admin).await;
    assert_eq!(st, StatusCode::OK, "{all}");
    all["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["reservations"].as_array().is_some_and(|r| !r.is_empty()))
        .count()
}

/// `YYYY-MM-DDTHH:MM` of an API date.
fn minute(v: &Value) -> String {
    v.as_str().unwrap_or_default().replace(' ', "T").chars().take(16).collect()
}

async fn a_member_books_an_offer_once(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    let s = &w.s;
    enrol_as(s, &w.admin, "h-one").await;
    enrol_as(s, &w.admin, "h-two").await;
    // Another lease holds h-one until 11:00: two hosts from 09:00 do not fit.
    host_lease(s, &w.admin, "blocker", "2031-03-04 09:00", "2031-03-04 11:00", "h-one").await;
    let name = "offer-made";
    let args = json!({"login": w.alice_login, "name": name, "min": 2, "max": 2,
        "start": "2031-03-04T09:00", "end": "2031-03-04T12:00"});
    let mut drive = browser.drive(&s.url, "offer_flow", &args);
    let mut booked = String::new();
    let out = loop {
        match drive.next().await {
            Said::Ask(a) => {
                let step = a.as_str().map(str::to_string).unwrap_or_else(|| a["ask"].to_string());
                let leases = named(s, &w.admin, name).await;
                match step.as_str() {
                    "declined" => assert!(leases.is_empty(), "a declined booking made {leases:?}"),
                    _ => {
                        assert_eq!(leases.len(), 1, "{step}: want exactly one lease: {leases:?}");
                        let l = &leases[0];
                        if booked.is_empty() {
                            booked = l["id"].as_str().unwrap().to_string();
                        }
                        assert_eq!(l["id"], booked.as_str(), "{step}: {l}");
                    }
                }
                drive.answer(&json!({})).await;
            }
            Said::Done { result, errors } => {
                assert!(errors.is_empty(), "the page's script failed: {errors:?}");
                break result;
            }
        }
    };
    assert_eq!(out["fits"], "false", "{out}");
    assert_eq!(out["advice_asks"], 1, "the check asked more than once: {out}");
    assert_eq!(out["offer_asks"], 1, "offers asked more than once: {out}");
    let offer = &out["offers"][0];
    assert_eq!(offer["hosts"], 2, "{out}");
    // Not before h-one is free, and as long as asked.
    let start = minute(&offer["start"]);
    assert!(start.as_str() >= "2031-03-04T11:00", "{out}");
    for k in ["book_declined", "book_asked"] {
        assert!(out[k].as_str().unwrap().contains(name), "{k}: {out}");
    }
    // The lease booked is exactly the offer: its window and host count.
    assert!(!booked.is_empty(), "no lease was booked: {out}");
    let (st, l) = s.get(&format!("/v1/leases/{booked}"), &w.admin).await;
    assert_eq!(st, StatusCode::OK, "{l}");
    assert_eq!(minute(&l["lease"]["start_date"]), start, "{l} vs {offer}");
    assert_eq!(minute(&l["lease"]["end_date"]), minute(&offer["end"]), "{l} vs {offer}");
    let (sh, sm): (i64, i64) = (start[11..13].parse().unwrap(), start[14..16].parse().unwrap());
    assert_eq!(minute(&offer["end"]), format!("2031-03-04T{:02}:{:02}", sh + 3, sm), "3 hours: {offer}");
    assert_eq!(hosts_held(s, &w.admin, &booked).await, 2, "{l}");
    // The same offer again: refused as taken, as the API words it.
    let refused = out["refused"].as_str().unwrap();
    assert!(refused.starts_with("409") && refused.contains("booked already") && refused.contains(&booked), "{out}");
    assert_eq!(out["still_new"], true, "{out}");
    assert!(out["after"].as_array().unwrap().iter().all(|o| o["id"] != offer["id"]), "{out}");
    assert_eq!(named(s, &w.admin, name).await.len(), 1);
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_books_an_offer_once_noauth() {
    a_member_books_an_offer_once(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_books_an_offer_once_keystone() {
    a_member_books_an_offer_once(Mode::Keystone).await;
}

async fn times_show_and_are_read_in_the_browsers_zone(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    let s = &w.s;
    enrol_as(s, &w.admin, "h-one").await;
    enrol_as(s, &w.admin, "h-two").await;
    let l = host_lease(s, &w.alice, "in-utc", "2031-03-04 09:00", "2031-03-04 12:00", "h-one").await;
    let name = "zoned-made";
    let args = json!({"login": w.alice_login, "timezone": "Europe/Paris", "lease": l["id"], "day": "2031-03-04", "name": name,
        "host": "h-two", "start": "2031-03-05T10:00", "end": "2031-03-05T12:00"});
    let mut drive = browser.drive(&s.url, "zone_flow", &args);
    match drive.next().await {
        Said::Ask(a) => assert_eq!(a, "created"),
        Said::Done { result, .. } => panic!("nothing made: {result}"),
    }
    // Made at 10:00 to 12:00 Paris (CET, UTC+1): stored at 09:00 to 11:00 UTC.
    let made = named(s, &w.admin, name).await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(minute(&made[0]["start_date"]), "2031-03-05T09:00", "{made:?}");
    assert_eq!(minute(&made[0]["end_date"]), "2031-03-05T11:00", "{made:?}");
    drive.answer(&json!({})).await;
    let out = drive.result().await;
    assert_eq!(out["options"], json!(["UTC", "Europe/Paris"]), "{out}");
    assert_eq!(out["local_before"], json!([]), "{out}");
    assert_eq!(out["local"], json!(["berth.zone"]), "{out}");
    let fields = out["fields"].as_str().unwrap();
    assert!(fields.contains("Start (Europe/Paris)") && fields.contains("2031-03-04 10:00"), "{out}");
    assert!(fields.contains("End (Europe/Paris)") && fields.contains("2031-03-04 13:00"), "{out}");
    assert_eq!(out["new_end"], "2031-03-04T13:00", "{out}");
    let list = out["list"].as_str().unwrap();
    assert!(list.contains("Start (Europe/Paris)") && list.contains("2031-03-04 10:00"), "{out}");
    assert!(!list.contains("UTC"), "{out}");
    // The calendar's grid is UTC days: it says UTC.
    assert_eq!(out["calendar_range"], "2031-03-04 00:00 – 2031-03-05 00:00 UTC", "{out}");
    assert_eq!(out["after_reload"], "local", "{out}");
    // The form read its wall time in Paris: the advice found it fits as asked.
    assert_eq!(out["fits"], "true", "{out}");
    assert!(out["form"].as_str().unwrap().contains("Start (Europe/Paris)"), "{out}");
    assert!(out["asked"].as_str().unwrap().contains("2031-03-05 10:00 – 2031-03-05 12:00 Europe/Paris"), "{out}");
    let made_fields = out["made_fields"].as_str().unwrap();
    assert!(made_fields.contains("2031-03-05 10:00") && made_fields.contains("2031-03-05 12:00"), "{out}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn times_show_and_are_read_in_the_browsers_zone_noauth() {
    times_show_and_are_read_in_the_browsers_zone(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn times_show_and_are_read_in_the_browsers_zone_keystone() {
    times_show_and_are_read_in_the_browsers_zone(Mode::Keystone).await;
}
