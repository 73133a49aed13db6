//! The console's pages against real data: the calendar's bars at the right
//! hosts and hours, no other project's lease name shown to a member (in
//! the page nor in the calendar's JSON), the live log within 2 s and after
//! a restart, and a screenshot of every page.

use berth_testkit::{Server, ADMIN, ALICE, BOB};
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::browser::Said;
use super::{enrol, host_lease, Browser};

/// Three hosts and three leases on 2031-03-04: two of alice's (p1), one of bob's (p2).
async fn three_leases(s: &Server) -> Vec<Value> {
    for h in ["h-alpha", "h-beta", "h-gamma"] {
        enrol(s, h).await;
    }
    vec![
        host_lease(s, ALICE, "alpha-build", "2031-03-04 09:00", "2031-03-04 13:00", "h-alpha").await,
        host_lease(s, BOB, "beta-demo", "2031-03-04 14:00", "2031-03-04 20:00", "h-beta").await,
        host_lease(s, ALICE, "gamma-night", "2031-03-04 22:00", "2031-03-05 02:00", "h-gamma").await,
    ]
}

/// Each bar of the drawn calendar as (label, host row, first hour, last hour), read
/// back from the geometry: the row under its top edge, the hours under its ends.
fn bars(g: &Value) -> Vec<(String, String, f64, f64)> {
    let t = |k: &str| g[k].as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    let (start, end) = (t("start"), t("end"));
    let hours = (end - start).num_seconds() as f64 / 3600.0;
    let f = |k: &str| g[k].as_f64().unwrap();
    let (left, right, top, row) = (f("left"), f("right"), f("top"), f("row"));
    let rows: Vec<String> = g["rows"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect();
    g["bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let x = b["x"].as_f64().unwrap();
            let w = b["width"].as_f64().unwrap();
            let i = ((b["y"].as_f64().unwrap() - top) / row).floor() as usize;
            let at = |px: f64| (px - left) / (right - left) * hours;
            (b["label"].as_str().unwrap().to_string(), rows[i].clone(), at(x), at(x + w))
        })
        .collect()
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.05
}

#[tokio::test(flavor = "multi_thread")]
async fn the_calendar_shows_each_lease_at_its_host_and_hours() {
    let Some(browser) = Browser::find() else { return };
    let s = Server::start().await;
    three_leases(&s).await;
    let args = json!({"token": ADMIN, "day": "2031-03-04", "zoom": "day", "bars": 3, "shot": "calendar"});
    let out = browser.drive(&s.url, "calendar", &args).result().await;
    let mut seen = bars(&out["geometry"]);
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let want = [
        ("alpha-build", "h-alpha", 9.0, 13.0),
        ("beta-demo", "h-beta", 14.0, 20.0),
        ("gamma-night", "h-gamma", 22.0, 24.0),
    ];
    assert_eq!(seen.len(), want.len(), "{seen:?}");
    for ((label, host, from, to), (w_label, w_host, w_from, w_to)) in seen.iter().zip(want) {
        assert_eq!((label.as_str(), host.as_str()), (w_label, w_host), "{seen:?}");
        assert!(near(*from, w_from) && near(*to, w_to), "{label}: hours {from}..{to}, want {w_from}..{w_to}");
    }
    // The next day shows the rest of the night lease, from midnight to 02:00.
    let args = json!({"token": ADMIN, "day": "2031-03-05", "zoom": "day", "bars": 1, "shot": "calendar-next-day"});
    let out = browser.drive(&s.url, "calendar", &args).result().await;
    let next = bars(&out["geometry"]);
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!((next[0].0.as_str(), next[0].1.as_str()), ("gamma-night", "h-gamma"));
    assert!(near(next[0].2, 0.0) && near(next[0].3, 2.0), "{next:?}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_sees_no_other_projects_lease_names() {
    let Some(browser) = Browser::find() else { return };
    let s = Server::start().await;
    let leases = three_leases(&s).await;
    let hidden = ["alpha-build", "gamma-night", leases[0]["id"].as_str().unwrap(), leases[2]["id"].as_str().unwrap()];
    // The calendar's JSON: others' bars say only "reserved".
    let (st, cal) = s.get("/v1/calendar?start=2031-03-04 00:00&end=2031-03-06 00:00", BOB).await;
    assert_eq!(st, StatusCode::OK, "{cal}");
    let text = cal.to_string();
    for h in hidden.iter().chain(&["alice", "\"p1\""]) {
        assert!(!text.contains(h), "the member's calendar JSON names {h}: {text}");
    }
    let bars = cal["calendar"]["bars"].as_array().unwrap();
    assert_eq!(bars.len(), 3, "{cal}");
    let reserved: Vec<&Value> = bars.iter().filter(|b| b["lease_name"] == "reserved").collect();
    assert_eq!(reserved.len(), 2, "{cal}");
    assert!(reserved.iter().all(|b| b["visible"] == false && b["lease_id"].is_null() && b["project_id"].is_null()));
    assert!(bars.iter().any(|b| b["lease_name"] == "beta-demo" && b["visible"] == true));
    assert_eq!(cal["calendar"]["all_projects"], false);
    // The admin sees every name.
    let (_, all) = s.get("/v1/calendar?start=2031-03-04 00:00&end=2031-03-06 00:00", ADMIN).await;
    assert!(all.to_string().contains("alpha-build") && all["calendar"]["all_projects"] == true, "{all}");

    // The pages a member opens: none names another project's lease.
    let args = json!({"token": BOB, "day": "2031-03-04", "zoom": "day", "bars": 3, "shot": "calendar-member",
        "also": [["leases", "#lease-table tbody tr"], ["manager", "#manager-due tbody tr"],
                 ["quotas", "#quota-charts > *"], ["calendar/2031-03-04,week", "#calendar-svg g.bar"]]});
    let out = browser.drive(&s.url, "calendar", &args).result().await;
    let (page_text, html) = (out["text"].as_str().unwrap(), out["html"].as_str().unwrap());
    for h in hidden {
        assert!(!page_text.contains(h) && !html.contains(h), "the member's pages show {h}");
    }
    assert!(page_text.contains("beta-demo") && page_text.contains("reserved"), "{page_text}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_live_log_shows_a_new_entry_within_two_seconds_and_resumes_after_a_restart() {
    let Some(browser) = Browser::find() else { return };
    let mut s = Server::start().await;
    let mut drive = browser.drive(&s.url, "live", &json!({"token": ADMIN, "class": "CUSTOM_LIVE_BEFORE"}));
    match drive.next().await {
        Said::Ask(a) => assert_eq!(a, "restart"),
        Said::Done { result, .. } => panic!("no restart asked: {result}"),
    }
    s.restart().await;
    let put = reqwest::Client::new()
        .put(format!("{}/placement/resource_classes/CUSTOM_LIVE_AFTER", s.url))
        .header("x-auth-token", ADMIN)
        .header("openstack-api-version", "placement 1.39")
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    drive.answer(&json!({"class": "CUSTOM_LIVE_AFTER"})).await;
    let out = drive.result().await;
    let seconds = out["seconds"].as_f64().unwrap();
    assert!(seconds < 2.0, "the entry showed after {seconds} s");
    let cursors: Vec<&str> = out["cursors"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    let mut unique = cursors.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), cursors.len(), "an entry shown twice after reconnecting: {cursors:?}");
    for c in out["before"].as_array().unwrap() {
        assert!(cursors.contains(&c.as_str().unwrap()), "{c} lost after reconnecting");
    }
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn every_page_is_drawn_and_screenshotted() {
    let Some(browser) = Browser::find() else { return };
    let s = Server::start().await;
    let leases = three_leases(&s).await;
    let (st, q) = s.put("/v1/quotas/projects/p1", ADMIN, json!({"quotas": {"leases": 5, "VCPU": 64}})).await;
    assert!(st.is_success(), "{q}");
    let lease = leases[0]["id"].as_str().unwrap();
    let pages = json!([
        ["calendar-week", "calendar/2031-03-04,week", "#calendar-svg g.bar"],
        ["leases", "leases", "#lease-table tbody tr"],
        ["lease", format!("lease/{lease}"), "#lease-timeline-svg"],
        ["live-log", "log", "#log-table tr.entry"],
        ["manager", "manager", "#manager-due tbody tr"],
        ["quotas", "quotas/p1,p2/2031-03-01T00:00/2031-04-01T00:00", "#quota-charts svg.quota"],
    ]);
    let out = browser.drive(&s.url, "pages", &json!({"token": ADMIN, "pages": pages})).result().await;
    assert!(out["leases"].as_str().unwrap().contains("alpha-build"), "{out}");
    let one = out["lease"].as_str().unwrap();
    assert!(one.contains("alpha-build") && one.contains("h-alpha") && one.contains("start_lease"), "{one}");
    assert!(out["live-log"].as_str().unwrap().contains("LeaseCreated"), "{out}");
    assert!(out["manager"].as_str().unwrap().contains("alpha-build"), "{out}");
    let quotas = out["quotas"].as_str().unwrap();
    assert!(quotas.contains("p1:") && quotas.contains("p2:") && quotas.contains("VCPU"), "{quotas}");
    // noauth takes no password: its form stays hidden.
    assert_eq!(out["password_form_shown"], false, "{out}");
    // The manager counts every waiting event, not only those due.
    let (_, waiting) = s.get("/v1/events?status=UNDONE&limit=200", ADMIN).await;
    let n = waiting["events"].as_array().unwrap().len();
    assert!(out["manager"].as_str().unwrap().contains(&format!("waiting {n} (due now 0)")), "{out}");
    // Limited resources have bars; unlimited ones none, their numbers in full.
    let drawn = out["quota_drawing"].as_array().unwrap();
    let p1 = drawn.iter().find(|d| d["project"] == "p1").expect("p1 drawn");
    let p2 = drawn.iter().find(|d| d["project"] == "p2").expect("p2 drawn");
    assert!(p1["bars"].as_array().unwrap().contains(&json!("VCPU")), "{p1}");
    assert!(p2["bars"].as_array().unwrap().is_empty(), "unlimited resources drawn as bars: {p2}");
    assert!(!p2["unlimited"].as_array().unwrap().is_empty(), "{p2}");
    assert!(quotas.contains("no limit") && !quotas.contains("limit no"), "{quotas}");
    for d in drawn {
        assert!(d["text_right"].as_f64().unwrap() <= d["width"].as_f64().unwrap(), "text cut off: {d}");
    }
    for shot in ["login", "calendar-week", "leases", "lease", "live-log", "manager", "quotas"] {
        let path = super::browser::screenshots().join(format!("{shot}.png"));
        assert!(std::fs::metadata(&path).map(|m| m.len() > 1000).unwrap_or(false), "no screenshot {}", path.display());
    }
    s.assert_no_panic();
}
