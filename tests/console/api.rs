//! The console's routes without a browser: `/ui` and its security headers,
//! the calendar's bad input, the login where berthd has no Keystone.

use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn raw(s: &Server, path: &str) -> reqwest::Response {
    reqwest::Client::new().get(format!("{}{path}", s.url)).send().await.unwrap()
}

#[tokio::test]
async fn the_console_is_served_with_its_security_headers_and_no_inline_script() {
    let s = Server::start().await;
    let page = raw(&s, "/ui").await;
    assert_eq!(page.status(), StatusCode::OK);
    let h = page.headers().clone();
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in ["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "connect-src 'self'"] {
        assert!(csp.contains(part), "{csp} lacks {part}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let html = page.text().await.unwrap();
    // Every script is a file of the console's, and each is served.
    let scripts: Vec<&str> = html.split("<script").skip(1).collect();
    assert!(scripts.len() >= 4, "{html}");
    for tag in scripts {
        let src = tag.split("src=\"").nth(1).and_then(|t| t.split('"').next()).expect("a script with no src");
        assert!(tag.contains("></script>"), "inline script: {tag}");
        let file = raw(&s, src).await;
        assert_eq!(file.status(), StatusCode::OK, "{src}");
        assert!(file.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
        assert!(file.headers().contains_key("content-security-policy"));
    }
    let handler = html.split(" on").skip(1).any(|t| {
        let rest = t.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        rest.len() < t.len() && rest.starts_with('=')
    });
    assert!(!html.contains(" style=") && !handler, "inline style or handler in the page");
    let css = raw(&s, "/ui/console.css").await;
    assert!(css.headers()["content-type"].to_str().unwrap().starts_with("text/css"));
    let missing = raw(&s, "/ui/nope.js").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "berth.not_found", "{body}");
}

#[tokio::test]
async fn the_calendar_refuses_bad_windows_with_a_code() {
    let s = Server::start().await;
    for bad in [
        "start=yesterday",
        "end=2031-13-01 00:00",
        "start=2031-01-02 00:00&end=2031-01-01 00:00",
        "start=2031-01-01 00:00&end=2031-01-01 00:00",
        "start=2031-01-01 00:00&end=2033-01-01 00:00",
        "colour=red",
        "start=99999-01-01 00:00",
    ] {
        let (st, body) = s.get(&format!("/v1/calendar?{bad}"), ALICE).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body["code"].is_string(), "{bad}: {body}");
    }
    let (st, body) = s.get("/v1/calendar", "").await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{body}");
    let (st, body) = s.get("/v1/calendar", ALICE).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["calendar"]["bars"], json!([]));
    s.assert_no_panic();
}

#[tokio::test]
async fn a_password_login_needs_keystone() {
    let s = Server::start().await;
    let (_, methods) = s.get("/v1/login", "").await;
    assert_eq!(methods["login"], json!({"auth": "noauth", "methods": ["token"]}));
    let creds = json!({"user": "alice", "password": "x", "project": "p1"});
    let (st, body) = s.post("/v1/login", "", creds).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("berth.login.unavailable")), "{body}");
    for bad in [
        json!({"user": "alice"}),
        json!({"user": "", "password": "x", "project": "p1"}),
        json!([1]),
        json!({"user": "a", "password": "x", "project": "p1", "admin": true}),
    ] {
        let (st, body) = s.post("/v1/login", "", bad.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["code"], "berth.invalid", "{bad}: {body}");
    }
    let (_, me) = s.get("/v1/whoami", ADMIN).await;
    let may = me["whoami"]["may"].as_object().unwrap().clone();
    assert!(may.len() >= 15 && may.values().all(|v| v == true), "{me}");
    assert_eq!(
        (
            &me["whoami"]["user_id"],
            &me["whoami"]["project_id"],
            &me["whoami"]["all_projects"],
            &me["whoami"]["read_log"]
        ),
        (&json!("admin"), &json!("admin"), &json!(true), &json!(true))
    );
    let (_, me) = s.get("/v1/whoami", ALICE).await;
    assert_eq!(me["whoami"]["all_projects"], false);
    assert_eq!(me["whoami"]["read_log"], false);
    // A member's controls: its own leases, none of the admin's.
    let member = [
        "lease_create",
        "lease_update",
        "lease_delete",
        "availability",
        "lease_share",
        "lease_transfer",
        "lease_withdraw_transfer",
    ];
    for (k, v) in me["whoami"]["may"].as_object().unwrap() {
        assert_eq!(v, &json!(member.contains(&k.as_str())), "{k}: {me}");
    }
}

#[tokio::test]
async fn a_reader_may_use_no_control_but_advice() {
    let s = Server::start().await;
    let me: Value = reqwest::Client::new()
        .get(format!("{}/v1/whoami", s.url))
        .header("x-auth-token", "carol:p1")
        .header("x-roles", "reader")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for (k, v) in me["whoami"]["may"].as_object().unwrap() {
        assert_eq!(v, &json!(k == "availability"), "{k}: {me}");
    }
}

#[tokio::test]
async fn whoami_says_what_the_policy_file_allows() {
    // The console's controls follow the rules in force, not a copy of the defaults.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "\"blazar:leases:delete\": \"rule:admin\"\n\"berth:events:fire\": \"rule:admin_or_project_member\"\n",
    )
    .unwrap();
    let config = dir.path().join("berth.toml");
    std::fs::write(&config, format!("policy_file = {:?}\n", policy.display().to_string())).unwrap();
    let db = berth_store::testing::TestDatabase::new().await;
    let s = Server::launch(db, &[("BERTH_MANAGER__ENABLED", "false")], Some(&config)).await;
    let (_, me) = s.get("/v1/whoami", ALICE).await;
    assert_eq!(me["whoami"]["may"]["lease_delete"], false, "{me}");
    assert_eq!(me["whoami"]["may"]["events_fire"], true, "{me}");
    assert_eq!(me["whoami"]["may"]["lease_update"], true, "{me}");
    s.assert_no_panic();
}
