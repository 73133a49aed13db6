//! The root version document and the health probes.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};

use crate::error::{ApiError, Style};
use crate::tags;
use crate::AppState;

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(versions, healthz, readyz))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(versions)).route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

#[utoipa::path(
    get,
    path = "/",
    tag = tags::BERTH,
    summary = "Version document: the APIs served and their versions",
    responses(
        (status = 200, description = "The APIs", body = VersionDocument),
    ),
)]
async fn versions(State(state): State<AppState>) -> Json<VersionDocument> {
    Json(VersionDocument {
        name: "berth",
        version: state.build.version,
        commit: state.build.commit,
        apis: Apis {
            placement: PlacementVersions { href: "/placement/", min_version: "1.0", max_version: "1.39" },
            reservation: ReservationVersion { href: "/v1/", version: "v1" },
        },
    })
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct PlacementVersions {
    href: &'static str,
    min_version: &'static str,
    max_version: &'static str,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct ReservationVersion {
    href: &'static str,
    version: &'static str,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Apis {
    placement: PlacementVersions,
    reservation: ReservationVersion,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct VersionDocument {
    name: &'static str,
    version: &'static str,
    /// The commit built from: twelve hex digits, or `unknown`.
    commit: &'static str,
    apis: Apis,
}

/// This process's clock against the database's.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct ClockReading {
    offset_seconds: f64,
    round_trip_seconds: f64,
    warn_past_seconds: f64,
    skewed: bool,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct Readiness {
    status: &'static str,
    clock: ClockReading,
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = tags::BERTH,
    summary = "The process is up",
    responses(
        (status = 200, description = "`ok`", body = String, content_type = "text/plain"),
    ),
)]
async fn healthz() -> &'static str {
    "ok"
}

/// The process can serve: its database answers. Also says how far this
/// process's clock is from the database's (measured by the same round
/// trip); a skewed clock does not make it unready, since nothing decides on
/// it.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = tags::BERTH,
    summary = "The process can serve: its database answers; how far its clock is from the database's",
    responses(
        (status = 200, description = "Ready", body = Readiness),
    ),
)]
async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    let offset = state.clock.measure(&state.app).await.map_err(|e| {
        tracing::warn!(error = %e, "not ready");
        ApiError::from(e).in_style(Style::Berth)
    })?;
    Ok(Json(Readiness {
        status: "ready",
        clock: ClockReading {
            offset_seconds: offset.seconds,
            round_trip_seconds: offset.round_trip,
            warn_past_seconds: state.clock.warn_past_s(),
            skewed: state.clock.skewed(&offset),
        },
    }))
}
