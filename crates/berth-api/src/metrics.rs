//! `/metrics` in Prometheus text format: whatever the process records through
//! the `metrics` facade: HTTP requests by route and status, the database
//! pool, claim batches, the manager's figures, the build. `docs/metrics.md`
//! lists every series; each exists from start (zero until something happens).

use std::sync::OnceLock;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::access::{Action, Target};
use crate::auth::MaybeAnonymous;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// HTTP requests answered, by method, matched route and status.
pub const HTTP_REQUESTS: &str = "berth_http_requests_total";
/// Seconds from a request's arrival to its response's head, by method and route.
pub const HTTP_DURATION: &str = "berth_http_request_duration_seconds";
pub const HTTP_DURATION_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Database connections the pool may open.
pub const DB_POOL_MAX: &str = "berth_db_pool_max_connections";
/// Database connections open now.
pub const DB_POOL_SIZE: &str = "berth_db_pool_connections";
/// Open connections nobody holds.
pub const DB_POOL_IDLE: &str = "berth_db_pool_idle_connections";
/// Tasks waiting for a connection.
pub const DB_POOL_WAITERS: &str = "berth_db_pool_waiters";
/// Claims decided together in one transaction (recorded by berth-store's
/// claim batcher under this name).
pub const CLAIM_BATCH: &str = "berth_claim_batch_size";
pub const CLAIM_BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
/// Seconds a claim waited in the queue for a lane to take it into a batch
/// (recorded by berth-store's claim batcher under this name).
pub const CLAIM_LANE_WAIT: &str = "berth_claim_lane_wait_seconds";
/// Seconds a claim batch's transaction took, from its take to its answers
/// (recorded by berth-store's claim batcher under this name).
pub const CLAIM_BATCH_DURATION: &str = "berth_claim_batch_seconds";
/// Bounds for the claim times: a batch takes a millisecond or a few on a
/// quiet server, so the buckets are finer below 10 ms than HTTP's.
pub const CLAIM_SECONDS_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.007, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1.0];
/// Store commands started over after a transient failure (deadlock,
/// serialization failure, lost insert race), counted by berth-store.
pub const COMMAND_RETRIES: &str = "berth_command_retries";
/// New leases that passed over hosts another creation was writing, by host
/// passed over, counted by berth-store.
pub const PLACEMENT_PASSED_OVER: &str = "berth_lease_placement_passed_over";
/// New leases whose chosen hosts another command took before the lock,
/// decided again, counted by berth-store.
pub const PLACEMENT_LOST_RACES: &str = "berth_lease_placement_lost_races";
/// Reads of the hosts near a new whole-host lease's window, each depth
/// counted, by berth-store: more than one per creation means the holds
/// near the window were too sparse to vouch for best fit at the first.
pub const PLACEMENT_NEAR_READS: &str = "berth_lease_placement_near_reads";
/// New leases decided on every candidate host, the near read unable to
/// vouch for the choice, counted by berth-store.
pub const PLACEMENT_FULL_READS: &str = "berth_lease_placement_full_reads";
/// Reads of the hosts nearest a new lease's window through their free spans.
pub const PLACEMENT_SPAN_READS: &str = "berth_lease_placement_span_reads";
/// 1, with the version as a label.
pub const BUILD_INFO: &str = "berth_build_info";

/// Installs the process-wide recorder (once; later calls are no-ops), with
/// histogram buckets per metric name (the HTTP and claim batch buckets are
/// added here), and creates this crate's series at zero.
pub fn install(buckets: &[(&str, &[f64])]) {
    HANDLE.get_or_init(|| {
        let mut b = PrometheusBuilder::new();
        let ours: [(&str, &[f64]); 4] = [
            (HTTP_DURATION, HTTP_DURATION_BUCKETS),
            (CLAIM_BATCH, CLAIM_BATCH_BUCKETS),
            (CLAIM_LANE_WAIT, CLAIM_SECONDS_BUCKETS),
            (CLAIM_BATCH_DURATION, CLAIM_SECONDS_BUCKETS),
        ];
        for (name, bounds) in buckets.iter().chain(&ours) {
            b = b.set_buckets_for_metric(Matcher::Full(name.to_string()), bounds).expect("buckets are not empty");
        }
        let handle = b.install_recorder().expect("one metrics recorder per process");
        let upkeep = handle.clone();
        // Histograms are drained into their buckets on upkeep.
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                upkeep.run_upkeep();
            }
        });
        handle
    });
    describe();
}

/// Describes this crate's series and creates them, so that a scrape right
/// after start shows every one.
fn describe() {
    metrics::describe_counter!(HTTP_REQUESTS, "HTTP requests answered, by method, matched route and status");
    metrics::describe_histogram!(
        HTTP_DURATION,
        metrics::Unit::Seconds,
        "From a request's arrival to its response's head, by method and matched route"
    );
    metrics::describe_gauge!(DB_POOL_MAX, "Database connections the pool may open");
    metrics::describe_gauge!(DB_POOL_SIZE, "Database connections open");
    metrics::describe_gauge!(DB_POOL_IDLE, "Open database connections nobody holds");
    metrics::describe_gauge!(DB_POOL_WAITERS, "Tasks waiting for a database connection");
    metrics::describe_histogram!(CLAIM_BATCH, "Claims decided together in one transaction");
    metrics::describe_histogram!(CLAIM_LANE_WAIT, metrics::Unit::Seconds, "A claim's wait in the queue for a lane");
    metrics::describe_histogram!(CLAIM_BATCH_DURATION, metrics::Unit::Seconds, "A claim batch's transaction");
    metrics::describe_gauge!(BUILD_INFO, "1, labelled with the version of berthd");
    metrics::describe_counter!(COMMAND_RETRIES, "Store commands started over after a transient failure");
    metrics::describe_counter!(PLACEMENT_PASSED_OVER, "Hosts a new lease passed over as another creation wrote them");
    metrics::describe_counter!(PLACEMENT_LOST_RACES, "New leases decided again after losing their chosen hosts");
    metrics::describe_counter!(PLACEMENT_NEAR_READS, "Reads of the hosts near a new lease's window, each depth");
    metrics::describe_counter!(PLACEMENT_FULL_READS, "New leases decided on every candidate host");
    metrics::describe_counter!(
        PLACEMENT_SPAN_READS,
        "Reads of the hosts nearest a new lease's window through their free spans"
    );
    // The scrape itself is the first request a fresh process may answer:
    // its series exist before it is counted.
    let _ = metrics::counter!(HTTP_REQUESTS, "method" => "GET", "route" => "/metrics", "status" => "200");
    let _ = metrics::histogram!(HTTP_DURATION, "method" => "GET", "route" => "/metrics");
    for name in [CLAIM_BATCH, CLAIM_LANE_WAIT, CLAIM_BATCH_DURATION] {
        let _ = metrics::histogram!(name);
    }
    for name in [
        COMMAND_RETRIES,
        PLACEMENT_PASSED_OVER,
        PLACEMENT_LOST_RACES,
        PLACEMENT_NEAR_READS,
        PLACEMENT_FULL_READS,
        PLACEMENT_SPAN_READS,
    ] {
        metrics::counter!(name).increment(0);
    }
    for name in [DB_POOL_MAX, DB_POOL_SIZE, DB_POOL_IDLE, DB_POOL_WAITERS] {
        metrics::gauge!(name).set(0.0);
    }
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Counts a request by its matched route (the template, never the raw
/// path) and status, and times it.
pub async fn count_request(req: Request, next: Next) -> Response {
    let route = crate::access_log::route_of(&req).to_owned();
    let method = method_label(req.method());
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::histogram!(HTTP_DURATION, "method" => method, "route" => route.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "method" => method, "route" => route, "status" => status).increment(1);
    resp
}

/// A request's method as a label: one of HTTP's own, or `other`. A client
/// may send any token as a method, and each label value is a series kept
/// for the life of the process.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    const KNOWN: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
        Method::TRACE,
        Method::CONNECT,
    ];
    KNOWN.iter().find(|m| *m == method).map_or("other", Method::as_str)
}

/// The pool's figures, read when scraped.
fn sample_pool(state: &AppState) {
    let s = state.app.health().pool();
    metrics::gauge!(DB_POOL_MAX).set(s.max as f64);
    metrics::gauge!(DB_POOL_SIZE).set(s.open as f64);
    metrics::gauge!(DB_POOL_IDLE).set(s.idle as f64);
    metrics::gauge!(DB_POOL_WAITERS).set(s.waiting as f64);
}

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(render))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(render))
}

/// `berth:metrics:read` decides, for anonymous callers too: a policy file
/// that sets it to `"@"` opens `/metrics` to scrapers without a token.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = tags::BERTH,
    summary = "Metrics in Prometheus text format",
    responses(
        (status = 200, description = "The metrics", body = String, content_type = "text/plain"),
    ),
)]
async fn render(State(state): State<AppState>, MaybeAnonymous(ctx): MaybeAnonymous) -> Result<Response, ApiError> {
    state.rules.authorize(&ctx, Action::MetricsRead, &Target::own(&ctx))?;
    sample_pool(&state);
    Ok(match HANDLE.get() {
        Some(h) => (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.render()).into_response(),
        None => {
            (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain")], "metrics are not enabled\n").into_response()
        }
    })
}
