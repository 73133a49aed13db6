//! Tokens Keystone cannot read: one longer than Berth accepts is 401 before
//! any call out (counted at a real HTTP server standing in for Keystone),
//! and Keystone's answers that the subject token is malformed (400, 413,
//! 431) are 401, not an outage; an error of Keystone's own stays 503.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::IntoResponse;

use super::*;

/// The longest token Berth looks at.
const MAX_TOKEN: usize = 8 * 1024;

/// Validations the stand-in was asked for.
#[derive(Clone, Default)]
struct Asked(Arc<AtomicUsize>);

fn token_doc(user: &str, project: &str, roles: &[&str]) -> Value {
    let expires = (Utc::now() + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let roles: Vec<Value> = roles.iter().map(|r| json!({"id": r, "name": r})).collect();
    json!({"token": {"user": {"id": user, "domain": {"id": "default"}},
                     "project": {"id": project, "domain": {"id": "default"}},
                     "roles": roles, "expires_at": expires}})
}

/// Berth's own token.
async fn issue() -> impl IntoResponse {
    (AxumStatus::CREATED, [("x-subject-token", "own")], axum::Json(token_doc("berth", "service", &["service"])))
}

/// A validation: the subject token says what to answer.
async fn validate(axum::extract::State(asked): axum::extract::State<Asked>, h: HeaderMap) -> axum::response::Response {
    asked.0.fetch_add(1, Ordering::SeqCst);
    let subject = h.get("x-subject-token").and_then(|v| v.to_str().ok()).unwrap_or("");
    match subject {
        "good" => axum::Json(token_doc("u1", "p1", &["member", "reader"])).into_response(),
        "malformed-400" => AxumStatus::BAD_REQUEST.into_response(),
        "malformed-413" => AxumStatus::PAYLOAD_TOO_LARGE.into_response(),
        "malformed-431" => AxumStatus::REQUEST_HEADER_FIELDS_TOO_LARGE.into_response(),
        "keystone-broken" => AxumStatus::INTERNAL_SERVER_ERROR.into_response(),
        _ => AxumStatus::NOT_FOUND.into_response(),
    }
}

/// The stand-in's `/v3` and its counter.
async fn stand_in() -> (String, Asked) {
    let asked = Asked::default();
    let app = axum::Router::new()
        .route("/v3/auth/tokens", axum::routing::post(issue).get(validate))
        .with_state(asked.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v3"), asked)
}

#[tokio::test]
async fn oversized_tokens_are_401_without_asking_keystone_and_malformed_answers_are_401() {
    let (url, asked) = stand_in().await;
    let s = Server::launch(
        TestDatabase::new().await,
        &[
            ("BERTH_AUTH", "keystone"),
            ("BERTH_MANAGER__ENABLED", "false"),
            ("BERTH_KEYSTONE__AUTH_URL", &url),
            ("BERTH_KEYSTONE__USERNAME", "berth"),
            ("BERTH_KEYSTONE__PASSWORD", "secret"),
            ("BERTH_KEYSTONE__PROJECT_NAME", "service"),
            // Every request asks again: each answer below is the stand-in's.
            ("BERTH_KEYSTONE__CACHE_TTL_S", "0"),
        ],
        None,
    )
    .await;
    let a = as_token(&s, Method::GET, "/v1/leases", "good", None).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let before = asked.0.load(Ordering::SeqCst);
    assert!(before >= 1, "the stand-in was asked");

    // Longer than Berth accepts, in every header a token travels in, and in
    // both APIs' documents: 401, and Keystone never hears of it.
    for len in [MAX_TOKEN + 1, 100 * 1024] {
        let long = "a".repeat(len);
        for (path, headers) in [
            ("/v1/leases", vec![("x-auth-token", long.as_str())]),
            ("/v1/leases", vec![("x-auth-token", "good"), ("x-service-token", long.as_str())]),
            ("/placement/resource_providers", vec![("x-auth-token", long.as_str())]),
        ] {
            let a = call(&s, Method::GET, path, &headers, None).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{len} bytes at {path}: {}", a.body);
            assert!(!a.headers.contains_key("retry-after"), "an oversized token is no outage");
            let code = a.body["code"].as_str().or_else(|| a.body["errors"][0]["code"].as_str());
            assert_eq!(code, Some("berth.auth.bad_token"), "{}", a.body);
        }
    }
    assert_eq!(asked.0.load(Ordering::SeqCst), before, "an oversized token reached Keystone");
    // At the bound exactly, Keystone is asked (and knows no such token).
    let a = as_token(&s, Method::GET, "/v1/leases", &"a".repeat(MAX_TOKEN), None).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    assert_eq!(asked.0.load(Ordering::SeqCst), before + 1);

    // Keystone says the token is malformed: the caller's fault, 401.
    for t in ["malformed-400", "malformed-413", "malformed-431"] {
        let a = as_token(&s, Method::GET, "/v1/leases", t, None).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{t}: {}", a.body);
        assert_eq!(a.body["code"], "berth.unauthenticated", "{t}: {}", a.body);
        assert!(!a.headers.contains_key("retry-after"), "{t}");
    }
    // Keystone's own error is still an outage.
    let a = as_token(&s, Method::GET, "/v1/leases", "keystone-broken", None).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.body);
    assert!(a.headers.contains_key("retry-after"));
    assert!(!s.log().contains(&"a".repeat(64)), "a token reached the log");
}

/// The case as found: a 100 kB token against the real Keystone was a 503.
#[tokio::test]
async fn a_100_kb_token_is_401_against_the_real_keystone() {
    let ks = Keystone::shared();
    let s = ks.berthd(&[]).await;
    let a = as_token(&s, Method::GET, "/v1/leases", &"x".repeat(100 * 1024), None).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    assert_eq!(a.body["code"], "berth.auth.bad_token", "{}", a.body);
    assert!(!s.log().contains("identity service unavailable"), "logged as an outage");
}
