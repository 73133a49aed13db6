//! `/metrics` in Prometheus text format: whatever the process records through
//! the `metrics` facade (the manager's counters and lag histogram, ...).

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::{header, StatusCode};
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

/// Installs the process-wide recorder (once; later calls are no-ops), with
/// histogram buckets per metric name.
pub fn install(buckets: &[(&str, &[f64])]) {
    HANDLE.get_or_init(|| {
        let mut b = PrometheusBuilder::new();
        for (name, bounds) in buckets {
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
    Ok(match HANDLE.get() {
        Some(h) => (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.render()).into_response(),
        None => {
            (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain")], "metrics are not enabled\n").into_response()
        }
    })
}
