//! Logging in to the console with user, password and project in keystone
//! mode, against the run's real Keystone (`make test` starts it; like the
//! other Keystone tests, this one fails without it): the token lands in the
//! tab's session storage only.

use serde_json::json;

use super::{keystone_env as keystone, Browser};

#[tokio::test(flavor = "multi_thread")]
async fn a_keystone_user_logs_in_with_a_password_and_the_token_stays_in_the_tab() {
    let Some(browser) = Browser::find() else { return };
    let s = super::keystone_berthd().await;
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
