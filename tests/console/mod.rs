//! The web console in a real browser: headless Chromium from the
//! distribution, driven by Playwright for Python (`drive.py` beside this
//! file, from a venv under the target directory) against a real berthd.
//! Each test writes screenshots to `target/ui-screenshots/`. Without
//! Chromium the tests skip with a loud message; `make test` installs it
//! first (`scripts/ensure-chromium.sh`), so CI runs them.

mod api;
mod browser;
mod keystone;
mod manager;
mod pages;

use berth_testkit::{Server, ADMIN};
use reqwest::StatusCode;
use serde_json::{json, Value};

pub use browser::Browser;

/// A host enrolled over the API; its provider id.
pub async fn enrol(s: &Server, name: &str) -> String {
    let (st, host) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100})).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

/// A lease of one whole host over `[start, end)` (`YYYY-MM-DD HH:MM`).
pub async fn host_lease(s: &Server, token: &str, name: &str, start: &str, end: &str, host: &str) -> Value {
    let body = json!({"name": name, "start_date": start, "end_date": end, "events": [],
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
                          "hypervisor_properties": json!(["==", "$hypervisor_hostname", host])}]});
    let (st, l) = s.post("/v1/leases", token, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    l["lease"].clone()
}
