//! A host's page, for an admin, in noauth and keystone mode: its own
//! timeline (its leases only), Disable (declined: nothing changes;
//! confirmed: the host is disabled and its lease moves to the other host),
//! Enable, and a maintenance window that then shows on the timeline.

use berth_testkit::Server;
use serde_json::{json, Value};

use super::browser::Said;
use super::{enrol_as, host_lease, Browser, Mode, World};

async fn host(s: &Server, admin: &str, id: &str) -> Value {
    let (_, h) = s.get(&format!("/v1/os-hosts/{id}"), admin).await;
    h["host"].clone()
}

/// The provider ids the lease's allocations are on.
async fn held(s: &Server, admin: &str, lease: &str) -> Vec<String> {
    let (_, a) = s.get(&format!("/v1/os-hosts/allocations?lease_id={lease}"), admin).await;
    let all = a["allocations"].as_array().unwrap().iter();
    // Every host is listed; those holding the lease list its reservation.
    all.filter(|a| a["reservations"].as_array().is_some_and(|r| !r.is_empty()))
        .map(|a| a["resource_id"].as_str().unwrap().to_string())
        .collect()
}

async fn an_admin_disables_enables_and_maintains_a_host(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    let s = &w.s;
    let one = enrol_as(s, &w.admin, "h-one").await;
    let two = enrol_as(s, &w.admin, "h-two").await;
    // One whole host, either: the one it lands on is the host of the page.
    let body = json!({"name": "movable", "start_date": "2031-03-04 09:00", "end_date": "2031-03-04 12:00",
        "events": [], "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", &w.alice, body).await;
    assert!(st.is_success(), "{l}");
    let id = l["lease"]["id"].as_str().unwrap().to_string();
    let on = held(s, &w.admin, &id).await;
    let (h1, h2, name, other) =
        if on == [one.clone()] { (one, two, "h-one", "h-two") } else { (two, one, "h-two", "h-one") };
    // A lease on the other host: the page's timeline leaves it out.
    host_lease(s, &w.alice, "elsewhere", "2031-03-05 09:00", "2031-03-05 12:00", other).await;
    let args = json!({"login": w.admin_login, "host": h1, "name": name, "day": "2031-03-03",
        "maint_start": "2031-03-06T00:00", "maint_end": "2031-03-06T06:00", "reason": "disk swap"});
    let mut drive = browser.drive(&s.url, "host_admin", &args);
    let out = loop {
        match drive.next().await {
            Said::Ask(a) => {
                let h = host(s, &w.admin, &h1).await;
                match a.as_str().unwrap() {
                    "disable_kept" => assert_eq!(h["disabled"], false, "a declined Disable acted: {h}"),
                    "disabled" => assert_eq!(h["disabled"], true, "{h}"),
                    "enabled" => assert_eq!(h["disabled"], false, "{h}"),
                    "maintenance" => {
                        let (_, m) = s.get("/v1/maintenance", &w.admin).await;
                        let m = &m["maintenance"][0];
                        assert_eq!(m["hosts"], json!([h1]), "{m}");
                        assert!(m["start_date"].as_str().unwrap().starts_with("2031-03-06T00:00"), "{m}");
                        assert!(m["end_date"].as_str().unwrap().starts_with("2031-03-06T06:00"), "{m}");
                        assert_eq!(m["reason"], "disk swap", "{m}");
                    }
                    other => panic!("unexpected ask {other}"),
                }
                drive.answer(&json!({})).await;
            }
            Said::Done { result, errors } => {
                assert!(errors.is_empty(), "the page's script failed: {errors:?}");
                break result;
            }
        }
    };
    let listed = out["listed"].as_str().unwrap();
    assert!(listed.contains("h-one") && listed.contains("h-two"), "{out}");
    assert_eq!(out["rows"], json!([name]), "{out}");
    assert_eq!(out["bars"], json!(["movable"]), "{out}");
    assert_eq!(out["toggle"], "Disable", "{out}");
    assert!(out["disable_asked"].as_str().unwrap().contains(name), "{out}");
    assert!(out["maint_asked"].as_str().unwrap().contains("2031-03-06 00:00"), "{out}");
    assert!(out["maintenance"].as_str().unwrap().contains("disk swap"), "{out}");
    assert!(out["nav"].as_array().unwrap().contains(&json!("hosts")), "{out}");
    // Disabling h-one moved the lease it held to h-two, and enabling moved nothing back.
    assert_eq!(held(s, &w.admin, &id).await, [h2], "{out}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_disables_enables_and_maintains_a_host_noauth() {
    an_admin_disables_enables_and_maintains_a_host(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_disables_enables_and_maintains_a_host_keystone() {
    an_admin_disables_enables_and_maintains_a_host(Mode::Keystone).await;
}
