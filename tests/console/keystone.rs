//! Logging in to the console with user, password and project in keystone
//! mode, against the run's real Keystone (`make test` starts it; like the
//! other Keystone tests, this one fails without it): the token lands in the
//! tab's session storage only.

use berth_store::testing::TestDatabase;
use berth_testkit::Server;
use serde_json::json;

use super::Browser;

fn keystone(key: &str) -> String {
    std::env::var(key)
        .unwrap_or_else(|_| panic!("no {key}: run the tests under scripts/keystone/with-keystone.sh (make test does)"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keystone_user_logs_in_with_a_password_and_the_token_stays_in_the_tab() {
    let Some(browser) = Browser::find() else { return };
    let (url, user, password, project) = (
        keystone("KEYSTONE_URL"),
        keystone("KEYSTONE_SERVICE_USER"),
        keystone("KEYSTONE_SERVICE_PASSWORD"),
        keystone("KEYSTONE_SERVICE_PROJECT"),
    );
    let env = [
        ("BERTH_AUTH", "keystone"),
        ("BERTH_MANAGER__ENABLED", "false"),
        ("BERTH_KEYSTONE__AUTH_URL", url.as_str()),
        ("BERTH_KEYSTONE__USERNAME", user.as_str()),
        ("BERTH_KEYSTONE__PASSWORD", password.as_str()),
        ("BERTH_KEYSTONE__PROJECT_NAME", project.as_str()),
    ];
    let s = Server::launch(TestDatabase::new().await, &env, None).await;
    let alice = json!({"user": "alice", "password": keystone("KEYSTONE_PASSWORD"), "project": "p1"});
    let out = browser.drive(&s.url, "password_login", &alice).result().await;
    let p1 = keystone("KEYSTONE_P1_ID");
    assert!(out["who"].as_str().unwrap().contains(&p1), "{out}");
    assert_eq!(out["session"], json!(["berth.token"]), "{out}");
    assert_eq!(out["local"], json!([]), "{out}");
    assert_eq!(out["cookies"], json!([]), "{out}");
    assert_eq!(out["password_left"], "", "{out}");
    assert!(!s.log().contains(&keystone("KEYSTONE_PASSWORD")), "the password reached the log");
    s.assert_no_panic();
}
