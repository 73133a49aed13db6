//! Placement claims over HTTP: the real router on a loopback port, 100
//! providers with VCPU and MEMORY_MB, `clients` connections each issuing
//! `PUT /placement/allocations/{new consumer}` (microversion 1.39) for
//! `seconds`. Reports claims per second, latency, and the providers over
//! capacity afterwards (which must be none).
//!
//! With a Keystone in reach (`KEYSTONE_URL` and the service user's
//! `KEYSTONE_SERVICE_*`, as `make bench` sets them), the same run again with
//! keystone authentication, every client sending one real token whose
//! validation is cached, beside the noauth rate: the cost of authentication.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use berth_api::auth::keystone::{Keystone, KeystoneConfig};
use berth_api::{AppState, Authenticator, Rules};
use berth_core::EventMeta;
use berth_store::testing::TestDatabase;
use rand::Rng;
use serde_json::json;
use uuid::Uuid;

use crate::report::{ms, percentile, Report};

const PROVIDERS: usize = 100;
/// Per provider: room for this many one-VCPU claims, more than a run makes
/// on this kind of machine, so the run measures claims, not refusals.
const VCPU: i64 = 1024;

pub async fn run(report: &mut Report, clients: usize, seconds: u64) -> Result<()> {
    let Some((keystone_auth, token)) = keystone().await? else {
        claims(report, clients, seconds, Arc::new(Authenticator::Noauth), "admin".into(), "noauth").await?;
        report
            .line("Placement claims with keystone auth: not measured (no KEYSTONE_URL; make bench starts one)".into());
        return Ok(());
    };
    // Interleaved rounds, best of each: on a busy machine one run's rate
    // swings more than the cost being measured.
    let keystone_auth = Arc::new(keystone_auth);
    let (mut noauth, mut with_keystone) = (0f64, 0f64);
    for _ in 0..2 {
        noauth = noauth
            .max(claims(report, clients, seconds, Arc::new(Authenticator::Noauth), "admin".into(), "noauth").await?);
        let k = keystone_auth.clone();
        with_keystone =
            with_keystone.max(claims(report, clients, seconds, k, token.clone(), "keystone, cache warm").await?);
    }
    report.line(format!(
        "Placement claims, keystone vs noauth (best of two interleaved rounds each): {:.1}% of the noauth rate",
        100.0 * with_keystone / noauth.max(1e-9)
    ));
    Ok(())
}

/// Berth's Keystone authenticator and a token of the service user (admin
/// and service in the test world), from `with-keystone.sh`'s variables.
async fn keystone() -> Result<Option<(Authenticator, String)>> {
    let Ok(url) = std::env::var("KEYSTONE_URL") else { return Ok(None) };
    let var = |k: &str| std::env::var(k).with_context(|| format!("{k} is not set"));
    let (user, password, project) =
        (var("KEYSTONE_SERVICE_USER")?, var("KEYSTONE_SERVICE_PASSWORD")?, var("KEYSTONE_SERVICE_PROJECT")?);
    let cfg = KeystoneConfig {
        auth_url: url.clone(),
        username: Some(user.clone()),
        password: Some(password.clone()),
        project_name: Some(project.clone()),
        ..KeystoneConfig::default()
    };
    let auth = Keystone::new(cfg).map_err(anyhow::Error::msg)?;
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "password": password, "domain": {"id": "default"}}}},
        "scope": {"project": {"name": project, "domain": {"id": "default"}}}}});
    let resp = reqwest::Client::new().post(format!("{url}/auth/tokens")).json(&body).send().await?;
    ensure!(resp.status().as_u16() == 201, "Keystone refused the service user: {}", resp.status());
    let token = resp.headers()["x-subject-token"].to_str()?.to_string();
    Ok(Some((Authenticator::Keystone(Box::new(auth)), token)))
}

/// What one client saw: latencies of the claims made, refusals for
/// capacity, other failures.
type Tally = (Vec<Duration>, usize, usize);

/// One run on fresh providers as `token`; the claims per second.
async fn claims(
    report: &mut Report,
    clients: usize,
    seconds: u64,
    auth: Arc<Authenticator>,
    token: String,
    mode: &str,
) -> Result<f64> {
    let db = TestDatabase::new().await;
    let store = crate::setup::claim_store(&db, clients + 4)?;
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let providers = crate::setup::providers(&store, &meta, PROVIDERS, "host-", VCPU, VCPU * 256).await?;
    crate::setup::warm(&db, &store, &providers).await?;
    let base = serve(store, auth).await?;

    let providers = Arc::new(providers);
    // One request first, so the timed run meets a warm validation cache.
    let warm = reqwest::Client::new().get(format!("{base}/resource_providers")).header("x-auth-token", &token);
    ensure!(warm.send().await?.status().is_success(), "the {mode} token is refused");
    let token = Arc::new(token);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        // One connection per client, kept alive.
        let http = reqwest::Client::builder().pool_max_idle_per_host(1).build()?;
        tasks.push(tokio::spawn(client(http, providers.clone(), base.clone(), token.clone(), deadline)));
    }
    let started = Instant::now();
    let (mut latencies, mut refused, mut failed) = (Vec::new(), 0, 0);
    for t in tasks {
        let (l, r, f) = t.await?;
        latencies.extend(l);
        refused += r;
        failed += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let rate = latencies.len() as f64 / elapsed;
    report.rate(
        &format!(
            "Placement claims over HTTP, {mode} ({clients} connections, {PROVIDERS} providers; {refused} refused for \
             capacity, {failed} failed)"
        ),
        rate,
    );
    report.line(format!(
        "Placement claim latency, {mode}: p50 {}, p99 {}",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0))
    ));
    let over = over_capacity(&base, &token, &providers).await?;
    report.line(format!("Placement providers over capacity after the run: {over}"));
    ensure!(failed == 0, "{failed} claims failed with something other than a capacity refusal");
    Ok(rate)
}

/// The real router on a loopback port, authenticating with `auth`; its
/// Placement base URL.
async fn serve(store: berth_store::Store, auth: Arc<Authenticator>) -> Result<String> {
    let state = AppState {
        app: berth_app::App::bare(store),
        auth,
        rules: Arc::new(Rules::defaults()),
        clock: Default::default(),
        build: berth_api::Build::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/placement", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, berth_api::router(state)).await });
    Ok(base)
}

/// One client: claims one VCPU for a new consumer on a random provider,
/// again and again until `deadline`.
async fn client(
    http: reqwest::Client,
    providers: Arc<Vec<Uuid>>,
    base: String,
    token: Arc<String>,
    deadline: Instant,
) -> Tally {
    let (mut latencies, mut refused, mut failed) = (Vec::new(), 0usize, 0usize);
    while Instant::now() < deadline {
        let p = providers[rand::thread_rng().gen_range(0..providers.len())];
        let body = json!({
            "allocations": {p.to_string(): {"resources": {"VCPU": 1, "MEMORY_MB": 256}}},
            "project_id": "bench",
            "user_id": "bench",
            "consumer_generation": null,
            "consumer_type": "INSTANCE",
        });
        let t = Instant::now();
        let resp = http
            .put(format!("{base}/allocations/{}", Uuid::new_v4()))
            .header("x-auth-token", token.as_str())
            .header("openstack-api-version", "placement 1.39")
            .json(&body)
            .send()
            .await;
        match resp.map(|r| r.status().as_u16()) {
            Ok(204) => latencies.push(t.elapsed()),
            Ok(409) => refused += 1,
            _ => failed += 1,
        }
    }
    (latencies, refused, failed)
}

/// Providers over capacity, as Placement's own read view shows them.
async fn over_capacity(base: &str, token: &str, providers: &[Uuid]) -> Result<usize> {
    let http = reqwest::Client::new();
    let mut over = 0;
    for p in providers {
        let usages: serde_json::Value = http
            .get(format!("{base}/resource_providers/{p}/usages"))
            .header("x-auth-token", token)
            .send()
            .await?
            .json()
            .await?;
        let vcpu = usages["usages"]["VCPU"].as_i64().unwrap_or(0);
        let mem = usages["usages"]["MEMORY_MB"].as_i64().unwrap_or(0);
        if vcpu > VCPU || mem > VCPU * 256 {
            over += 1;
        }
    }
    Ok(over)
}
