//! The root version document and the health probes.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::error::{ApiError, Style};
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

/// The process can serve: its database answers. Also says how far this
/// process's clock is from the database's (measured by the same round
/// trip); a skewed clock does not make it unready, since nothing decides on
/// it.
async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let offset = state.clock.measure(&state.store).await.map_err(|e| {
        tracing::warn!(error = %e, "not ready");
        ApiError::from(e).in_style(Style::Berth)
    })?;
    Ok(Json(json!({
        "status": "ready",
        "clock": {
            "offset_seconds": offset.seconds,
            "round_trip_seconds": offset.round_trip,
            "warn_past_seconds": state.clock.warn_past_s(),
            "skewed": state.clock.skewed(&offset),
        },
    })))
}
