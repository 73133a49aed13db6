//! The root version document and the health probes.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(versions))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi))
}

async fn versions() -> Json<Value> {
    Json(json!({
        "name": "berth",
        "version": env!("CARGO_PKG_VERSION"),
        "apis": {
            "placement": {"href": "/placement/", "min_version": "1.0", "max_version": "1.39"},
            "reservation": {"href": "/v1/", "version": "v1"}
        }
    }))
}

/// The OpenAPI document of every route.
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(crate::openapi::document())
}

/// The process is up.
async fn healthz() -> &'static str {
    "ok"
}

/// The process can serve: its database answers.
async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable")
        }
    }
}
