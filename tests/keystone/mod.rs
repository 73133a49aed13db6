//! Berth behind a real Keystone (scripts/keystone): tokens of an admin, a
//! member of p1, a member of p2, a reader of p1 and the service user get
//! what the policy says; a service may act with a user's token; a revoked
//! token is refused once its cache entry ends; an expired token is 401; a
//! stopped Keystone is 503 with Retry-After, and berthd serves again when
//! it returns; a restricted application credential makes only the requests
//! its access rules allow (`access_rules`); oversized and malformed tokens
//! are 401, never a call out or an outage (`tokens`). `make test` starts the
//! shared Keystone (scripts/keystone/with-keystone.sh); without it these
//! tests fail.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use berth_store::testing::TestDatabase;
use berth_testkit::Server;
use chrono::{DurationRound, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

mod access_rules;
mod tokens;

fn run_sh() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/keystone/run.sh")
}

/// A Keystone's `KEY=value` lines.
struct Keystone {
    env: HashMap<String, String>,
    /// Set for a private Keystone this test started (stopped on drop).
    port: Option<u16>,
}

impl Keystone {
    /// The run's Keystone, from the environment `with-keystone.sh` sets.
    fn shared() -> Keystone {
        let env: HashMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("KEYSTONE_")).collect();
        assert!(
            env.contains_key("KEYSTONE_URL"),
            "no Keystone: run the tests under scripts/keystone/with-keystone.sh (make test does)"
        );
        Keystone { env, port: None }
    }

    /// A Keystone of this test's own, whose tokens live `expiration` seconds.
    fn private(expiration: u32) -> Keystone {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let out = Command::new(run_sh())
            .args(["start", &port.to_string()])
            .env("KEYSTONE_TOKEN_EXPIRATION", expiration.to_string())
            .output()
            .expect("run.sh start");
        assert!(out.status.success(), "keystone did not start: {}", String::from_utf8_lossy(&out.stderr));
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Keystone { env, port: Some(port) }
    }

    fn sh(&self, what: &str) {
        let port = self.port.expect("a private Keystone").to_string();
        let out = Command::new(run_sh()).args([what, &port]).output().expect("run.sh");
        assert!(out.status.success(), "run.sh {what}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn get(&self, key: &str) -> &str {
        self.env.get(key).unwrap_or_else(|| panic!("{key} missing from the Keystone environment"))
    }

    fn url(&self) -> &str {
        self.get("KEYSTONE_URL")
    }

    /// A project-scoped token of `user` (password `secret`).
    async fn token(&self, user: &str, project: &str) -> String {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "password": self.get("KEYSTONE_PASSWORD"), "domain": {"id": "default"}}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}}});
        let resp = http().post(format!("{}/auth/tokens", self.url())).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED, "token of {user} on {project}");
        resp.headers()["x-subject-token"].to_str().unwrap().to_string()
    }

    /// Revokes `token` (as Keystone's admin).
    async fn revoke(&self, token: &str) {
        let admin = self.token(self.get("KEYSTONE_ADMIN_USER"), self.get("KEYSTONE_ADMIN_PROJECT")).await;
        let resp = http()
            .delete(format!("{}/auth/tokens", self.url()))
            .header("x-auth-token", admin)
            .header("x-subject-token", token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    }

    /// berthd in keystone mode against this Keystone, with `extra` settings.
    async fn berthd(&self, extra: &[(&str, &str)]) -> Server {
        let mut env = vec![
            ("BERTH_AUTH", "keystone"),
            ("BERTH_MANAGER__ENABLED", "false"),
            ("BERTH_KEYSTONE__AUTH_URL", self.url()),
            ("BERTH_KEYSTONE__USERNAME", self.get("KEYSTONE_SERVICE_USER")),
            ("BERTH_KEYSTONE__PASSWORD", self.get("KEYSTONE_SERVICE_PASSWORD")),
            ("BERTH_KEYSTONE__PROJECT_NAME", self.get("KEYSTONE_SERVICE_PROJECT")),
        ];
        env.extend_from_slice(extra);
        Server::launch(TestDatabase::new().await, &env, None).await
    }
}

impl Drop for Keystone {
    fn drop(&mut self) {
        if let Some(port) = self.port {
            let _ = Command::new(run_sh()).args(["stop", &port.to_string()]).output();
        }
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap()
}

struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn call(s: &Server, method: Method, path: &str, headers: &[(&str, &str)], body: Option<Value>) -> Answer {
    let mut r = http().request(method, format!("{}{path}", s.url));
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
    Answer { status, headers, body }
}

async fn as_token(s: &Server, method: Method, path: &str, token: &str, body: Option<Value>) -> Answer {
    call(s, method, path, &[("x-auth-token", token)], body).await
}

fn lease_body(name: &str) -> Value {
    let start = (Utc::now() + chrono::Duration::days(10)).duration_trunc(chrono::Duration::hours(1)).unwrap();
    let fmt = |t: chrono::DateTime<Utc>| t.format("%Y-%m-%d %H:%M").to_string();
    json!({"name": name, "start_date": fmt(start), "end_date": fmt(start + chrono::Duration::hours(2)),
           "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1,
                             "memory_mb": 512, "disk_gb": 1}], "events": []})
}

/// Polls `path` as `token` until it answers `want` (at most a minute).
async fn until(s: &Server, path: &str, token: &str, want: StatusCode) -> Answer {
    for _ in 0..240 {
        let a = as_token(s, Method::GET, path, token, None).await;
        if a.status == want {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{path} never answered {want}");
}

#[tokio::test]
async fn keystone_tokens_get_what_the_policy_says() {
    let ks = Keystone::shared();
    let s = ks.berthd(&[]).await;
    let admin = ks.token("admin", "admin").await;
    let alice = ks.token("alice", "p1").await;
    let bob = ks.token("bob", "p2").await;
    let carol = ks.token("carol", "p1").await;
    let service = ks.token(ks.get("KEYSTONE_SERVICE_USER"), ks.get("KEYSTONE_SERVICE_PROJECT")).await;
    let p1 = ks.get("KEYSTONE_P1_ID").to_string();

    // Placement: admin and service write; project members and readers do not.
    let rp = json!({"name": "compute-1"});
    let a = as_token(&s, Method::POST, "/placement/resource_providers", &alice, Some(rp.clone())).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    assert!(a.body["errors"][0]["detail"].is_string(), "{}", a.body);
    let a = as_token(&s, Method::POST, "/placement/resource_providers", &service, Some(rp)).await;
    assert!(a.status.is_success(), "{}", a.body);
    let a = as_token(&s, Method::GET, "/placement/resource_providers", &admin, None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body["resource_providers"].as_array().unwrap().len(), 1);
    for (who, project, want) in [
        (&carol, p1.as_str(), StatusCode::OK),
        (&carol, ks.get("KEYSTONE_P2_ID"), StatusCode::FORBIDDEN),
        (&bob, p1.as_str(), StatusCode::FORBIDDEN),
    ] {
        let path = format!("/placement/usages?project_id={project}");
        let a =
            call(&s, Method::GET, &path, &[("x-auth-token", who), ("openstack-api-version", "placement 1.9")], None)
                .await;
        assert_eq!(a.status, want, "{}", a.body);
    }

    // Blazar: hosts are the admin's; a member of p1 leases in p1; its reader
    // reads; p2 sees nothing.
    let host = json!({"name": "h1", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let a = as_token(&s, Method::POST, "/v1/os-hosts", &admin, Some(host)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let a = as_token(&s, Method::POST, "/v1/leases", &alice, Some(lease_body("mine"))).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(a.body["lease"]["project_id"], json!(p1));
    assert_eq!(a.body["lease"]["user_id"], json!(ks.get("KEYSTONE_USER_ALICE_ID")));
    let path = format!("/v1/leases/{}", a.body["lease"]["id"].as_str().unwrap());
    assert_eq!(as_token(&s, Method::GET, &path, &carol, None).await.status, StatusCode::OK);
    let rename = Some(json!({"name": "renamed"}));
    assert_eq!(as_token(&s, Method::PUT, &path, &carol, rename.clone()).await.status, StatusCode::FORBIDDEN);
    assert_eq!(as_token(&s, Method::DELETE, &path, &carol, None).await.status, StatusCode::FORBIDDEN);
    let a = as_token(&s, Method::POST, "/v1/leases", &carol, Some(lease_body("reader's"))).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    assert_eq!(a.body["error_code"], 403, "{}", a.body);
    assert_eq!(as_token(&s, Method::GET, &path, &bob, None).await.status, StatusCode::NOT_FOUND);
    let a = as_token(&s, Method::GET, "/v1/leases", &bob, None).await;
    assert_eq!(a.body["leases"].as_array().unwrap().len(), 0, "{}", a.body);
    assert_eq!(as_token(&s, Method::GET, &path, &admin, None).await.status, StatusCode::OK);
    assert_eq!(
        as_token(&s, Method::POST, "/v1/os-hosts", &alice, Some(json!({"name": "x"}))).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(as_token(&s, Method::PUT, &path, &alice, rename).await.status, StatusCode::OK);

    // A service acting with a user's token: the user's context; a service
    // token without the service role is refused.
    let both = [("x-auth-token", alice.as_str()), ("x-service-token", service.as_str())];
    let a = call(&s, Method::GET, "/v1/leases", &both, None).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["leases"][0]["project_id"], json!(p1));
    let fake = [("x-auth-token", alice.as_str()), ("x-service-token", bob.as_str())];
    assert_eq!(call(&s, Method::GET, "/v1/leases", &fake, None).await.status, StatusCode::UNAUTHORIZED);

    // No token, or a bad one: 401 saying where to get one, in each API's document.
    let challenge = format!("Keystone uri=\"{}\"", ks.url());
    for headers in [&[][..], &[("x-auth-token", "not-a-token")][..]] {
        let a = call(&s, Method::GET, "/placement/resource_providers", headers, None).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        assert_eq!(a.headers["www-authenticate"], challenge.as_str());
        assert_eq!(a.body["errors"][0]["status"], 401, "{}", a.body);
        let a = call(&s, Method::GET, "/v1/leases", headers, None).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        assert_eq!(a.headers["www-authenticate"], challenge.as_str());
        assert_eq!(a.body["error_code"], 401, "{}", a.body);
        assert_eq!(a.body["code"], "berth.unauthenticated", "{}", a.body);
    }
    // The version documents stay anonymous.
    assert_eq!(call(&s, Method::GET, "/", &[], None).await.status, StatusCode::OK);
    assert_eq!(call(&s, Method::GET, "/placement/", &[], None).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_revoked_token_is_refused_once_its_cache_entry_ends() {
    let ks = Keystone::shared();
    let s = ks.berthd(&[("BERTH_KEYSTONE__CACHE_TTL_S", "1")]).await;
    let alice = ks.token("alice", "p1").await;
    assert_eq!(as_token(&s, Method::GET, "/v1/leases", &alice, None).await.status, StatusCode::OK);
    ks.revoke(&alice).await;
    let a = until(&s, "/v1/leases", &alice, StatusCode::UNAUTHORIZED).await;
    assert_eq!(a.body["code"], "berth.unauthenticated", "{}", a.body);
    // Another token of the same user still serves.
    let again = ks.token("alice", "p1").await;
    assert_eq!(as_token(&s, Method::GET, "/v1/leases", &again, None).await.status, StatusCode::OK);
}

#[tokio::test]
async fn expired_tokens_are_401_and_a_stopped_keystone_is_503_until_it_returns() {
    // Tokens (Berth's own too) live 6 s: Berth renews its own as it goes.
    let ks = Keystone::private(6);
    let s = ks.berthd(&[("BERTH_KEYSTONE__CACHE_TTL_S", "1"), ("BERTH_KEYSTONE__TIMEOUT_MS", "1500")]).await;
    let alice = ks.token("alice", "p1").await;
    assert_eq!(as_token(&s, Method::GET, "/v1/leases", &alice, None).await.status, StatusCode::OK);
    let a = until(&s, "/v1/leases", &alice, StatusCode::UNAUTHORIZED).await;
    assert_eq!(a.body["error_code"], 401, "{}", a.body);
    let fresh = ks.token("alice", "p1").await;
    assert_eq!(as_token(&s, Method::GET, "/v1/leases", &fresh, None).await.status, StatusCode::OK);

    ks.sh("pause");
    let a = until(&s, "/placement/resource_providers", &fresh, StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(a.body["errors"][0]["code"], "berth.auth.unavailable", "{}", a.body);
    assert!(a.headers.contains_key("retry-after"));
    let a = as_token(&s, Method::GET, "/v1/leases", &fresh, None).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.body["code"], "berth.auth.unavailable", "{}", a.body);
    assert!(a.headers.contains_key("retry-after"));

    ks.sh("start");
    let back = ks.token("alice", "p1").await;
    until(&s, "/v1/leases", &back, StatusCode::OK).await;
}

/// `berth ARGS` against `s` with only `env` to authenticate.
fn berth_cli(s: &Server, env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(berth_testkit::berth_bin());
    cmd.args(args).env("BERTH_URL", &s.url);
    for k in ["BERTH_TOKEN", "OS_CLOUD", "OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run berth");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_authenticates_as_the_openstack_client_does() {
    let ks = Keystone::shared();
    let s = ks.berthd(&[]).await;
    let admin = ks.token("admin", "admin").await;
    let host = json!({"name": "h1", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    assert_eq!(as_token(&s, Method::POST, "/v1/os-hosts", &admin, Some(host)).await.status, StatusCode::CREATED);
    let alice = as_token(&s, Method::POST, "/v1/leases", &ks.token("alice", "p1").await, Some(lease_body("cli"))).await;
    assert_eq!(alice.status, StatusCode::CREATED, "{}", alice.body);

    // OS_* variables, password.
    let password = [
        ("OS_AUTH_URL", ks.url()),
        ("OS_USERNAME", "carol"),
        ("OS_PASSWORD", ks.get("KEYSTONE_PASSWORD")),
        ("OS_PROJECT_NAME", "p1"),
        ("OS_USER_DOMAIN_NAME", "Default"),
        ("OS_PROJECT_DOMAIN_NAME", "Default"),
    ];
    let (ok, out, err) = berth_cli(&s, &password, &["lease", "list"]);
    assert!(ok && out.contains("cli"), "{out}{err}");
    let (ok, _, err) = berth_cli(&s, &password, &["host", "create", "h2"]);
    assert!(!ok && err.contains("403"), "a reader is a reader from the CLI too: {err}");
    let wrong =
        [("OS_AUTH_URL", ks.url()), ("OS_USERNAME", "carol"), ("OS_PASSWORD", "nope"), ("OS_PROJECT_NAME", "p1")];
    let (ok, _, err) = berth_cli(&s, &wrong, &["lease", "list"]);
    assert!(!ok && err.contains("refused the credentials"), "{err}");

    // OS_CLOUD with a clouds.yaml, holding an application credential.
    let user_token = ks.token("alice", "p1").await;
    let resp = http()
        .post(format!("{}/users/{}/application_credentials", ks.url(), ks.get("KEYSTONE_USER_ALICE_ID")))
        .header("x-auth-token", &user_token)
        .json(&json!({"application_credential": {"name": format!("berth-cli-{}", uuid::Uuid::new_v4())}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let cred: Value = resp.json().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    std::fs::write(
        &clouds,
        format!(
            "clouds:\n  test:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {}\n      \
             application_credential_id: {}\n      application_credential_secret: {}\n",
            ks.url(),
            cred["application_credential"]["id"].as_str().unwrap(),
            cred["application_credential"]["secret"].as_str().unwrap()
        ),
    )
    .unwrap();
    let cloud = [("OS_CLOUD", "test"), ("OS_CLIENT_CONFIG_FILE", clouds.to_str().unwrap())];
    let (ok, out, err) = berth_cli(&s, &cloud, &["-f", "json", "lease", "list"]);
    assert!(ok, "{err}");
    let leases: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(leases.as_array().unwrap().len(), 1, "{out}");
}

/// The console's login: berthd asks Keystone on the user's behalf and hands
/// back a token scoped to the project, never to be cached; wrong
/// credentials are 401 and tell nothing more.
#[tokio::test]
async fn a_console_login_gets_a_keystone_token_for_the_project() {
    let ks = Keystone::shared();
    let s = ks.berthd(&[]).await;
    let a = call(&s, Method::GET, "/v1/login", &[], None).await;
    assert_eq!(a.body["login"], json!({"auth": "keystone", "methods": ["token", "password"]}), "{}", a.body);
    let creds = json!({"user": "alice", "password": ks.get("KEYSTONE_PASSWORD"), "project": "p1"});
    let a = call(&s, Method::POST, "/v1/login", &[], Some(creds.clone())).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.headers["cache-control"], "no-store");
    let login = &a.body["login"];
    assert_eq!(login["project_id"], json!(ks.get("KEYSTONE_P1_ID")));
    assert_eq!(login["user_id"], json!(ks.get("KEYSTONE_USER_ALICE_ID")));
    let token = login["token"].as_str().unwrap();
    let me = as_token(&s, Method::GET, "/v1/whoami", token, None).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.body);
    assert_eq!(me.body["whoami"]["project_id"], json!(ks.get("KEYSTONE_P1_ID")));
    assert_eq!(me.body["whoami"]["all_projects"], false);
    let mut wrong = creds.clone();
    wrong["password"] = json!("not-the-password");
    let a = call(&s, Method::POST, "/v1/login", &[], Some(wrong)).await;
    assert_eq!((a.status, a.body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("berth.unauthenticated")));
    let mut elsewhere = creds;
    elsewhere["project"] = json!("no-such-project");
    let a = call(&s, Method::POST, "/v1/login", &[], Some(elsewhere)).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    let a = call(&s, Method::POST, "/v1/login", &[], Some(json!({"user": "alice"}))).await;
    assert_eq!((a.status, a.body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("berth.invalid")), "{}", a.body);
    assert!(!s.log().contains(ks.get("KEYSTONE_PASSWORD")), "the password reached the log");
}
