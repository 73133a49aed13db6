//! The web console in a real browser: headless Chromium from the
//! distribution, driven by Playwright for Python (`drive.py` beside this
//! file, from a venv under the target directory) against a real berthd.
//! Each test writes screenshots to `target/ui-screenshots/`. Without
//! Chromium the tests skip with a loud message; `make test` installs it
//! first (`scripts/ensure-chromium.sh`), so CI runs them.

mod api;
mod browser;
mod calendar;
mod hosts;
mod keystone;
mod leasing;
mod manager;
mod offers;
mod pages;
mod sharing;

use berth_store::testing::TestDatabase;
use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

pub use browser::Browser;

/// A host enrolled over the API; its provider id.
pub async fn enrol(s: &Server, name: &str) -> String {
    enrol_as(s, ADMIN, name).await
}

/// A host enrolled by `token`'s caller; its provider id.
pub async fn enrol_as(s: &Server, token: &str, name: &str) -> String {
    let (st, host) =
        s.post("/v1/os-hosts", token, json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100})).await;
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

/// How the console's callers log in: noauth tokens, or Keystone passwords.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Noauth,
    Keystone,
}

/// A berthd (its manager off) and two callers: the admin and alice, a
/// member of p1; each as the browser logs in and as the test calls the API.
pub struct World {
    pub s: Server,
    /// The admin's and alice's tokens, for the test's own calls.
    pub admin: String,
    pub alice: String,
    /// What drive.py logs in with: a token, or user, password and project.
    pub admin_login: Value,
    pub alice_login: Value,
}

pub fn keystone_env(key: &str) -> String {
    std::env::var(key)
        .unwrap_or_else(|_| panic!("no {key}: run the tests under scripts/keystone/with-keystone.sh (make test does)"))
}

/// A berthd that checks Keystone tokens, against the run's Keystone.
pub async fn keystone_berthd() -> Server {
    let (url, user, password, project) = (
        keystone_env("KEYSTONE_URL"),
        keystone_env("KEYSTONE_SERVICE_USER"),
        keystone_env("KEYSTONE_SERVICE_PASSWORD"),
        keystone_env("KEYSTONE_SERVICE_PROJECT"),
    );
    let env = [
        ("BERTH_AUTH", "keystone"),
        ("BERTH_MANAGER__ENABLED", "false"),
        ("BERTH_KEYSTONE__AUTH_URL", url.as_str()),
        ("BERTH_KEYSTONE__USERNAME", user.as_str()),
        ("BERTH_KEYSTONE__PASSWORD", password.as_str()),
        ("BERTH_KEYSTONE__PROJECT_NAME", project.as_str()),
    ];
    Server::launch(TestDatabase::new().await, &env, None).await
}

impl World {
    pub async fn new(mode: Mode) -> World {
        match mode {
            Mode::Noauth => World {
                s: Server::start().await,
                admin: ADMIN.into(),
                alice: ALICE.into(),
                admin_login: json!(ADMIN),
                alice_login: json!(ALICE),
            },
            Mode::Keystone => {
                let s = keystone_berthd().await;
                let pw = keystone_env("KEYSTONE_PASSWORD");
                let admin_login = json!({"user": "admin", "password": pw, "project": "admin"});
                let alice_login = json!({"user": "alice", "password": pw, "project": "p1"});
                let token = |login: Value| {
                    let s = &s;
                    async move {
                        let (st, body) = s.post("/v1/login", "", login).await;
                        assert_eq!(st, StatusCode::OK, "{body}");
                        body["login"]["token"].as_str().unwrap().to_string()
                    }
                };
                let (admin, alice) = (token(admin_login.clone()).await, token(alice_login.clone()).await);
                World { s, admin, alice, admin_login, alice_login }
            }
        }
    }
}
