//! The calendar's navigation and drawing, in noauth and keystone mode:
//! zoom and steps keep the day in view (a month is a calendar month), a
//! week starts the day before the day in view, the chart fills the window
//! and follows it, the week has hour marks, each state has a colour of its
//! own; and a drag along a host's row fills the new lease form, which then
//! makes that lease.

use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{enrol_as, host_lease, Browser, Mode, World};

/// An sRGB colour as "rgb(r, g, b)" in CIELAB.
fn lab(css: &str) -> [f64; 3] {
    let n: Vec<f64> = css
        .trim_start_matches("rgba(")
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .take(3)
        .map(|v| v.trim().parse().unwrap())
        .collect();
    let lin = |c: f64| {
        let c = c / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let (r, g, b) = (lin(n[0]), lin(n[1]), lin(n[2]));
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
    let f = |t: f64| if t > 0.008856 { t.cbrt() } else { 7.787 * t + 16.0 / 116.0 };
    [116.0 * f(y) - 16.0, 500.0 * (f(x) - f(y)), 200.0 * (f(y) - f(z))]
}

fn delta_e(a: &str, b: &str) -> f64 {
    let (a, b) = (lab(a), lab(b));
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

// "Today" is the browser's day, on this machine's clock.
#[allow(clippy::disallowed_methods)]
async fn navigation_keeps_the_day_and_the_chart_fills_the_window(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    enrol_as(&w.s, &w.admin, "h-one").await;
    // 2026-12-05 is a Saturday.
    let args = json!({"login": w.admin_login, "day": "2026-12-05"});
    let out = browser.drive(&w.s.url, "navigate", &args).result().await;
    let today = Utc::now().date_naive();
    let day = |d: chrono::NaiveDate| d.format("%Y-%m-%d").to_string();
    let want = json!([
        ["week", ["2026-12-04", "2026-12-11"]],
        ["day", ["2026-12-05", "2026-12-06"]],
        ["month", ["2026-12-01", "2027-01-01"]],
        ["next", ["2027-01-01", "2027-02-01"]],
        ["day", ["2027-01-05", "2027-01-06"]],
        ["week", ["2027-01-04", "2027-01-11"]],
        ["next", ["2027-01-11", "2027-01-18"]],
        ["today", [day(today - Duration::days(1)), day(today + Duration::days(6))]],
    ]);
    assert_eq!(out["seen"], want, "{out}");
    // The chart fills its box (the window less the page's margins), and follows a wider window.
    let (width, room) = (out["width"][0].as_f64().unwrap(), out["width"][1].as_f64().unwrap());
    assert!(width >= 1200.0 && (width - room).abs() < 2.0, "{out}");
    assert!(out["wide"].as_f64().unwrap() >= 1500.0, "{out}");
    // Hour marks in a week: at least three a day.
    assert!(out["hours"].as_u64().unwrap() >= 21, "{out}");
    // Each state its own colour, far apart (CIELAB distance).
    let colours = out["colours"].as_object().unwrap();
    for s in ["PENDING", "STARTING", "ACTIVE", "TERMINATED", "ERROR", "reserved", "maintenance"] {
        assert!(colours.contains_key(s), "no {s} in the legend: {out}");
    }
    let all: Vec<(&String, &Value)> = colours.iter().collect();
    for (i, (a, ca)) in all.iter().enumerate() {
        for (b, cb) in &all[i + 1..] {
            let d = delta_e(ca.as_str().unwrap(), cb.as_str().unwrap());
            assert!(d >= 25.0, "{a} ({ca}) and {b} ({cb}) are too close: {d:.1}");
        }
    }
    w.s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn navigation_keeps_the_day_and_the_chart_fills_the_window_noauth() {
    navigation_keeps_the_day_and_the_chart_fills_the_window(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn navigation_keeps_the_day_and_the_chart_fills_the_window_keystone() {
    navigation_keeps_the_day_and_the_chart_fills_the_window(Mode::Keystone).await;
}

async fn a_selection_on_the_calendar_fills_the_form(mode: Mode) {
    let Some(browser) = Browser::find() else { return };
    let w = World::new(mode).await;
    let s = &w.s;
    enrol_as(s, &w.admin, "h-one").await;
    let h2 = enrol_as(s, &w.admin, "h-two").await;
    host_lease(s, &w.alice, "morning", "2031-03-04 06:00", "2031-03-04 09:00", "h-two").await;
    let args = json!({"login": w.alice_login, "day": "2031-03-04", "host": "h-two", "from": 10, "to": 13,
                      "name": "selected"});
    let out = browser.drive(&s.url, "select", &args).result().await;
    assert_eq!(
        out["form"],
        json!({"type": "physical:host", "hosts": "h-two", "min": "1", "max": "1",
               "start": "2031-03-04T10:00", "end": "2031-03-04T13:00", "fits": "true"}),
        "{out}"
    );
    let id = out["lease"].as_str().unwrap();
    let (st, l) = s.get(&format!("/v1/leases/{id}"), &w.alice).await;
    assert_eq!(st, StatusCode::OK, "{l}");
    assert!(l["lease"]["start_date"].as_str().unwrap().starts_with("2031-03-04T10:00"), "{l}");
    assert!(l["lease"]["end_date"].as_str().unwrap().starts_with("2031-03-04T13:00"), "{l}");
    let (_, a) = s.get(&format!("/v1/os-hosts/allocations?lease_id={id}"), &w.admin).await;
    let on = a["allocations"].as_array().unwrap().iter().find(|a| a["reservations"] != json!([]));
    assert_eq!(on.map(|a| &a["resource_id"]), Some(&json!(h2)), "{a}");
    s.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selection_on_the_calendar_fills_the_form_noauth() {
    a_selection_on_the_calendar_fills_the_form(Mode::Noauth).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selection_on_the_calendar_fills_the_form_keystone() {
    a_selection_on_the_calendar_fills_the_form(Mode::Keystone).await;
}
