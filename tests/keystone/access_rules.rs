//! Restricted application credentials, made in the real Keystone: a token
//! from one makes only the requests its access rules allow, through the
//! API, the console's routes and the CLI alike; an unrestricted one works
//! as its user does.

use super::*;

/// An application credential of alice's with `rules` (`None`: unrestricted):
/// its id and secret.
async fn credential(ks: &Keystone, rules: Option<Value>) -> (String, String) {
    let mut body = json!({"name": format!("restricted-{}", uuid::Uuid::new_v4())});
    if let Some(r) = rules {
        body["access_rules"] = r;
    }
    let resp = http()
        .post(format!("{}/users/{}/application_credentials", ks.url(), ks.get("KEYSTONE_USER_ALICE_ID")))
        .header("x-auth-token", ks.token("alice", "p1").await)
        .json(&json!({ "application_credential": body }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let cred: Value = resp.json().await.unwrap();
    let c = &cred["application_credential"];
    (c["id"].as_str().unwrap().to_string(), c["secret"].as_str().unwrap().to_string())
}

/// A token from the credential `(id, secret)`.
async fn credential_token(ks: &Keystone, (id, secret): &(String, String)) -> String {
    let body = json!({"auth": {"identity": {"methods": ["application_credential"],
                                            "application_credential": {"id": id, "secret": secret}}}});
    let resp = http().post(format!("{}/auth/tokens", ks.url())).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED, "a token of the application credential");
    resp.headers()["x-subject-token"].to_str().unwrap().to_string()
}

/// A token of alice's limited to `rules`.
async fn restricted(ks: &Keystone, rules: Value) -> String {
    let cred = credential(ks, Some(rules)).await;
    credential_token(ks, &cred).await
}

fn rule(service: &str, method: &str, path: &str) -> Value {
    json!({"service": service, "method": method, "path": path})
}

/// The refusal of a request the rules do not allow: 401, the route's
/// document, Keystone's challenge.
fn assert_refused(a: &Answer, what: &str) {
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{what}: {}", a.body);
    assert!(a.headers.contains_key("www-authenticate"), "{what}");
    let code = a.body["code"].as_str().or_else(|| a.body["errors"][0]["code"].as_str());
    assert_eq!(code, Some("berth.auth.access_rules"), "{what}: {}", a.body);
}

/// A berthd with a host, and a lease of alice's made with her own token.
async fn with_a_lease(ks: &Keystone) -> (Server, String) {
    let s = ks.berthd(&[]).await;
    let admin = ks.token("admin", "admin").await;
    let host = json!({"name": "h1", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    assert_eq!(as_token(&s, Method::POST, "/v1/os-hosts", &admin, Some(host)).await.status, StatusCode::CREATED);
    let a = as_token(&s, Method::POST, "/v1/leases", &ks.token("alice", "p1").await, Some(lease_body("hers"))).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let path = format!("/v1/leases/{}", a.body["lease"]["id"].as_str().unwrap());
    (s, path)
}

#[tokio::test]
async fn a_credential_that_reads_leases_does_nothing_else() {
    let ks = Keystone::shared();
    let (s, lease) = with_a_lease(&ks).await;
    let reader = restricted(&ks, json!([rule("reservation", "GET", "/v1/leases")])).await;

    let a = as_token(&s, Method::GET, "/v1/leases", &reader, None).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["leases"].as_array().unwrap().len(), 1, "{}", a.body);

    let a = as_token(&s, Method::POST, "/v1/leases", &reader, Some(lease_body("not allowed"))).await;
    assert_refused(&a, "a creation");
    assert_refused(&as_token(&s, Method::DELETE, &lease, &reader, None).await, "a deletion");
    let rename = Some(json!({"name": "renamed"}));
    assert_refused(&as_token(&s, Method::PUT, &lease, &reader, rename).await, "an update");
    assert_refused(&as_token(&s, Method::GET, &lease, &reader, None).await, "one lease (not in the rule)");
    let head = as_token(&s, Method::HEAD, "/v1/leases", &reader, None).await;
    assert_eq!(head.status, StatusCode::UNAUTHORIZED, "HEAD is not GET to an access rule");
    let usages = format!("/placement/usages?project_id={}", ks.get("KEYSTONE_P1_ID"));
    let a =
        call(&s, Method::GET, &usages, &[("x-auth-token", &reader), ("openstack-api-version", "placement 1.9")], None)
            .await;
    assert_refused(&a, "Placement's usages");
    // The console's own routes and the writes it makes.
    assert_refused(&as_token(&s, Method::GET, "/v1/calendar", &reader, None).await, "the console's calendar");
    assert_refused(&as_token(&s, Method::GET, "/v1/whoami", &reader, None).await, "the console's whoami");
    let end = format!("{lease}/end");
    assert_refused(&as_token(&s, Method::POST, &end, &reader, None).await, "the console's End now");

    // Nothing was written: the lease is still there, alone, unrenamed.
    let a = as_token(&s, Method::GET, &lease, &ks.token("alice", "p1").await, None).await;
    assert_eq!((a.status, a.body["lease"]["name"].as_str()), (StatusCode::OK, Some("hers")), "{}", a.body);

    // The same token beside a valid service token is a service's chain of
    // requests: keystonemiddleware lets it through, and so does Berth.
    let service = ks.token(ks.get("KEYSTONE_SERVICE_USER"), ks.get("KEYSTONE_SERVICE_PROJECT")).await;
    let both = [("x-auth-token", reader.as_str()), ("x-service-token", service.as_str())];
    assert_eq!(call(&s, Method::GET, &lease, &both, None).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_credential_that_creates_cannot_read_and_globs_match_as_keystones() {
    let ks = Keystone::shared();
    let (s, lease) = with_a_lease(&ks).await;

    let creator = restricted(&ks, json!([rule("reservation", "POST", "/v1/leases")])).await;
    let a = as_token(&s, Method::POST, "/v1/leases", &creator, Some(lease_body("made by a script"))).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let made = format!("/v1/leases/{}", a.body["lease"]["id"].as_str().unwrap());
    assert_refused(&as_token(&s, Method::GET, &made, &creator, None).await, "reading what it made");
    assert_refused(&as_token(&s, Method::GET, &lease, &creator, None).await, "reading another lease");
    assert_refused(&as_token(&s, Method::GET, "/v1/leases", &creator, None).await, "the list");

    // `*` is one segment: each lease, not the list, not a lease's events.
    let one = restricted(&ks, json!([rule("reservation", "GET", "/v1/leases/*")])).await;
    assert_eq!(as_token(&s, Method::GET, &lease, &one, None).await.status, StatusCode::OK);
    assert_eq!(as_token(&s, Method::GET, &made, &one, None).await.status, StatusCode::OK);
    assert_refused(&as_token(&s, Method::GET, "/v1/leases", &one, None).await, "the list under /*");
    let events = format!("{lease}/events");
    assert_refused(&as_token(&s, Method::GET, &events, &one, None).await, "events under /*");
    assert_refused(&as_token(&s, Method::DELETE, &lease, &one, None).await, "a deletion under GET /*");
    // `**` is anything below; `{name}` is one segment.
    let below = restricted(
        &ks,
        json!([rule("reservation", "GET", "/v1/**"), rule("placement", "GET", "/placement/resource_providers/{uuid}")]),
    )
    .await;
    assert_eq!(as_token(&s, Method::GET, &events, &below, None).await.status, StatusCode::OK);
    assert_eq!(as_token(&s, Method::GET, "/v1/leases", &below, None).await.status, StatusCode::OK);
    assert_refused(
        &as_token(&s, Method::POST, "/v1/leases", &below, Some(lease_body("x"))).await,
        "POST under GET /v1/**",
    );
    // Placement's rule lets a reader of p1 ask; the policy still decides (403).
    let rp = format!("/placement/resource_providers/{}", uuid::Uuid::new_v4());
    assert_eq!(as_token(&s, Method::GET, &rp, &below, None).await.status, StatusCode::FORBIDDEN);
    assert_refused(&as_token(&s, Method::GET, "/placement/resource_providers", &below, None).await, "the list");

    // An unrestricted credential is alice herself.
    let free = credential_token(&ks, &credential(&ks, None).await).await;
    let a = as_token(&s, Method::POST, "/v1/leases", &free, Some(lease_body("unrestricted"))).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(as_token(&s, Method::GET, &made, &free, None).await.status, StatusCode::OK);
    assert_eq!(as_token(&s, Method::DELETE, &made, &free, None).await.status, StatusCode::NO_CONTENT);
}

/// The CLI with a restricted credential in `clouds.yaml`: it lists, and a
/// creation is refused with the reason.
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_with_a_restricted_credential_reads_and_is_refused_the_rest() {
    let ks = Keystone::shared();
    let (s, _lease) = with_a_lease(&ks).await;
    let (id, secret) = credential(&ks, Some(json!([rule("reservation", "GET", "/v1/leases")]))).await;
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    std::fs::write(
        &clouds,
        format!(
            "clouds:\n  ci:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {}\n      \
             application_credential_id: {id}\n      application_credential_secret: {secret}\n",
            ks.url()
        ),
    )
    .unwrap();
    let cloud = [("OS_CLOUD", "ci"), ("OS_CLIENT_CONFIG_FILE", clouds.to_str().unwrap())];
    let (ok, out, err) = berth_cli(&s, &cloud, &["lease", "list"]);
    assert!(ok && out.contains("hers"), "{out}{err}");
    let (ok, _, err) = berth_cli(&s, &cloud, &["host", "list"]);
    assert!(!ok && err.contains("401") && err.contains("access rules"), "{err}");
}
