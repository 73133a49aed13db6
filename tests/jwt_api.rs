//! berthd in jwt mode, with keys made in the test: RS256, ES256 and EdDSA
//! tokens pass; expired, not yet valid, wrong audience or issuer, `alg:
//! none`, HS256 signed with the public key, an unknown key and a tampered
//! payload are each 401, and none of them reaches the log. A key set
//! served over HTTP is fetched again for an unknown key, at most once in
//! the refetch interval.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use berth_store::testing::TestDatabase;
use berth_testkit::Server;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use serde_json::{json, Value};

const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "berth";

/// A signing key and its public JWK.
struct TestKey {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
    /// The public key's bytes (what an HS256 forgery would sign with).
    public: Vec<u8>,
}

fn rsa_key(kid: &str) -> TestKey {
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    let der = key.to_pkcs1_der().unwrap();
    let (n, e) = (key.n().to_bytes_be(), key.e().to_bytes_be());
    TestKey {
        kid: kid.into(),
        alg: Algorithm::RS256,
        encoding: EncodingKey::from_rsa_der(der.as_bytes()),
        jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "n": B64.encode(&n), "e": B64.encode(&e)}),
        public: n,
    }
}

fn ec_key(kid: &str) -> TestKey {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref().to_vec();
    TestKey {
        kid: kid.into(),
        alg: Algorithm::ES256,
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({"kty": "EC", "kid": kid, "crv": "P-256",
                    "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])}),
        public: point,
    }
}

fn ed_key(kid: &str) -> TestKey {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let public = pair.public_key().as_ref().to_vec();
    TestKey {
        kid: kid.into(),
        alg: Algorithm::EdDSA,
        encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk: json!({"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": B64.encode(&public)}),
        public,
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn claims() -> Value {
    json!({"sub": "alice", "project_id": "p1", "roles": ["member", "reader"],
           "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600, "nbf": now() - 10})
}

fn sign(key: &TestKey, claims: &Value) -> String {
    let mut h = Header::new(key.alg);
    h.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&h, claims, &key.encoding).unwrap()
}

fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
}

/// berthd in jwt mode, logging at debug: the test kit's daemon (on a port
/// of its own, its stderr kept) with jwt settings over its defaults.
struct Daemon(Server);

impl Daemon {
    async fn start(jwks: &[(&str, &str)]) -> Daemon {
        let audience = format!("[{AUDIENCE:?}]");
        let mut env = vec![
            ("BERTH_AUTH", "jwt"),
            ("BERTH_LOG", "debug"),
            ("BERTH_MANAGER__ENABLED", "false"),
            ("BERTH_JWT__ISSUER", ISSUER),
            ("BERTH_JWT__AUDIENCE", audience.as_str()),
        ];
        env.extend_from_slice(jwks);
        Daemon(Server::launch(TestDatabase::new().await, &env, None).await)
    }

    fn log_text(&self) -> String {
        self.0.log()
    }

    async fn leases(&self, header: &str, value: &str) -> (StatusCode, Value) {
        let r =
            reqwest::Client::new().get(format!("{}/v1/leases", self.0.url)).header(header, value).send().await.unwrap();
        let st = r.status();
        (st, serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null))
    }

    async fn bearer(&self, token: &str) -> StatusCode {
        self.leases("authorization", &format!("Bearer {token}")).await.0
    }
}

/// The token with its payload replaced and the signature kept.
fn tampered(token: &str, claims: &Value) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    format!("{}.{}.{}", parts[0], B64.encode(claims.to_string()), parts[2])
}

#[tokio::test]
async fn tokens_are_checked_and_refused_ones_never_logged() {
    let (rs, es, ed) = (rsa_key("rs"), ec_key("es"), ed_key("ed"));
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, jwks(&[&rs, &es, &ed]).to_string().as_bytes()).unwrap();
    let path = file.path().display().to_string();
    let d = Daemon::start(&[("BERTH_JWT__JWKS_FILE", &path)]).await;

    for key in [&rs, &es, &ed] {
        let token = sign(key, &claims());
        let (st, body) = d.leases("authorization", &format!("Bearer {token}")).await;
        assert_eq!(st, StatusCode::OK, "{:?}: {body}", key.alg);
        assert_eq!(d.leases("x-auth-token", &token).await.0, StatusCode::OK, "X-Auth-Token");
    }
    // The claims make the context: a member of p1 leases in p1.
    let mut reader = claims();
    reader["roles"] = json!("reader");
    let r = reqwest::Client::new()
        .post(format!("{}/v1/leases", d.0.url))
        .bearer_auth(sign(&es, &reader))
        .json(&json!({"name": "x", "end_date": "2031-01-01 10:00"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "a reader may not create");

    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims();
        f(&mut c);
        c
    };
    let mut refused = vec![
        ("expired", sign(&rs, &with(&|c| c["exp"] = json!(now() - 3600)))),
        ("not yet valid", sign(&es, &with(&|c| c["nbf"] = json!(now() + 3600)))),
        ("wrong audience", sign(&ed, &with(&|c| c["aud"] = json!("someone-else")))),
        ("wrong issuer", sign(&rs, &with(&|c| c["iss"] = json!("https://evil.example")))),
        ("no expiry", sign(&rs, &with(&|c| c.as_object_mut().unwrap().remove("exp").map(|_| ()).unwrap()))),
        ("unknown key", sign(&rsa_key("other"), &claims())),
        ("tampered", tampered(&sign(&es, &claims()), &with(&|c| c["sub"] = json!("admin")))),
    ];
    // alg none: no signature at all.
    let none_header = B64.encode(json!({"alg": "none", "typ": "JWT", "kid": "rs"}).to_string());
    refused.push(("alg none", format!("{none_header}.{}.", B64.encode(claims().to_string()))));
    // HS256 with the RSA public key as the secret: the classic confusion.
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("rs".into());
    let forged = jsonwebtoken::encode(&h, &claims(), &EncodingKey::from_secret(&rs.public)).unwrap();
    refused.push(("HS256 with the public key", forged));
    for (what, token) in &refused {
        let (st, body) = d.leases("authorization", &format!("Bearer {token}")).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED, "{what}: {body}");
        assert_eq!(body["error_code"], 401, "{what}: {body}");
    }
    let (_, anonymous) = d.leases("x-nothing", "x").await;
    assert_eq!(anonymous["code"], "berth.unauthenticated");

    let log = d.log_text();
    assert!(log.contains("JWT"), "debug logging is on and speaks of refusals: {log}");
    for (what, token) in &refused {
        let signature = token.rsplit('.').next().unwrap();
        assert!(signature.is_empty() || !log.contains(signature), "{what}: its signature is in the log");
        assert!(!log.contains(token.as_str()), "{what}: the token is in the log");
    }
}

#[tokio::test]
async fn an_unknown_key_refetches_the_set_at_most_once_an_interval() {
    let (a, b) = (ec_key("a"), ed_key("b"));
    let served = Arc::new(Mutex::new(jwks(&[&a])));
    let fetches = Arc::new(Mutex::new(0));
    let app = {
        let (served, fetches) = (served.clone(), fetches.clone());
        axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let (served, fetches) = (served.clone(), fetches.clone());
                async move {
                    *fetches.lock().unwrap() += 1;
                    axum::Json(served.lock().unwrap().clone())
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let d = Daemon::start(&[("BERTH_JWT__JWKS_URL", &url), ("BERTH_JWT__REFETCH_INTERVAL_S", "0")]).await;
    assert_eq!(*fetches.lock().unwrap(), 1, "fetched at start");
    assert_eq!(d.bearer(&sign(&a, &claims())).await, StatusCode::OK);
    assert_eq!(*fetches.lock().unwrap(), 1, "a known key needs no fetch");
    // A key the issuer added since: fetched on first sight.
    *served.lock().unwrap() = jwks(&[&a, &b]);
    assert_eq!(d.bearer(&sign(&b, &claims())).await, StatusCode::OK);
    assert_eq!(*fetches.lock().unwrap(), 2);
    drop(d);

    // With the default interval, a flood of unknown keys fetches once.
    let d = Daemon::start(&[("BERTH_JWT__JWKS_URL", &url)]).await;
    let before = *fetches.lock().unwrap();
    let stranger = ec_key("c");
    for _ in 0..5 {
        assert_eq!(d.bearer(&sign(&stranger, &claims())).await, StatusCode::UNAUTHORIZED);
    }
    assert!(*fetches.lock().unwrap() - before <= 1, "unknown keys refetch at most once a minute");
}

/// A JWT with an `access_rules` claim is restricted as a Keystone
/// application credential is; a claim that is not a list of rules refuses
/// the token; OAuth's `scope` restricts nothing.
#[tokio::test]
async fn an_access_rules_claim_restricts_the_token() {
    let key = rsa_key("rs");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, jwks(&[&key]).to_string().as_bytes()).unwrap();
    let d = Daemon::start(&[("BERTH_JWT__JWKS_FILE", &file.path().display().to_string())]).await;
    let with_rules = |rules: Value| {
        let mut c = claims();
        c["access_rules"] = rules;
        sign(&key, &c)
    };
    let get_leases = with_rules(json!([{"service": "reservation", "method": "GET", "path": "/v1/leases"}]));
    assert_eq!(d.bearer(&get_leases).await, StatusCode::OK);
    let post = |token: String| {
        let url = format!("{}/v1/leases", d.0.url);
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .json(&json!({"name": "x", "end_date": "2031-01-01 10:00"}))
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (st, body) = post(get_leases.clone()).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("berth.auth.access_rules")), "{body}");
    let placement = with_rules(json!([{"service": "placement", "method": "GET", "path": "/v1/leases"}]));
    assert_eq!(d.bearer(&placement).await, StatusCode::UNAUTHORIZED, "a rule of another service");
    assert_eq!(d.bearer(&with_rules(json!([]))).await, StatusCode::UNAUTHORIZED, "no rule allows nothing");
    let (st, body) = d.leases("authorization", &format!("Bearer {}", with_rules(json!("GET /v1/leases")))).await;
    assert_eq!((st, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("berth.auth.bad_token")), "{body}");
    // `scope` is OAuth's consent, not a rule: a member still creates (and
    // is refused here only by the body's own checks, never by auth).
    let mut scoped = claims();
    scoped["scope"] = json!("openid profile");
    let (st, body) = post(sign(&key, &scoped)).await;
    assert!(st != StatusCode::UNAUTHORIZED && st != StatusCode::FORBIDDEN, "{st}: {body}");
}
