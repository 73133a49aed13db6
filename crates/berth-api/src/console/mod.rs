//! The web console at `/ui`: a page and its scripts, embedded in the
//! binary (no network, no build step), that call the same API as any
//! client with the token the user gave. What it may show is each route's
//! rule; the routes made for it are the calendar ([`calendar`]), a Keystone
//! login on the user's behalf and "who am I" ([`login`]).

mod calendar;
mod login;

use axum::extract::{Path, State};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::access::{Action, Target};
use crate::auth::MaybeAnonymous;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// The console's files: name, media type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    ("index.html", "text/html; charset=utf-8", include_str!("assets/index.html")),
    ("console.css", "text/css; charset=utf-8", include_str!("assets/console.css")),
    ("zone.js", "text/javascript; charset=utf-8", include_str!("assets/zone.js")),
    ("console.js", "text/javascript; charset=utf-8", include_str!("assets/console.js")),
    ("calendar.js", "text/javascript; charset=utf-8", include_str!("assets/calendar.js")),
    ("leases.js", "text/javascript; charset=utf-8", include_str!("assets/leases.js")),
    ("newlease.js", "text/javascript; charset=utf-8", include_str!("assets/newlease.js")),
    ("offers.js", "text/javascript; charset=utf-8", include_str!("assets/offers.js")),
    ("sharing.js", "text/javascript; charset=utf-8", include_str!("assets/sharing.js")),
    ("loans.js", "text/javascript; charset=utf-8", include_str!("assets/loans.js")),
    ("hosts.js", "text/javascript; charset=utf-8", include_str!("assets/hosts.js")),
    ("pages.js", "text/javascript; charset=utf-8", include_str!("assets/pages.js")),
    ("live.js", "text/javascript; charset=utf-8", include_str!("assets/live.js")),
];

/// No inline script or style, nothing from elsewhere, never in a frame.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(page, file, calendar::get, login::methods, login::login, login::whoami))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(page))
        .route("/ui/{file}", get(file))
        .route("/v1/calendar", get(calendar::get))
        .route("/v1/login", get(login::methods).post(login::login))
        .route("/v1/whoami", get(login::whoami))
}

/// Headers every answer under `/ui` carries.
fn guarded(media: &'static str, body: &'static str) -> Response {
    let h = |n: &'static str, v: &'static str| (HeaderName::from_static(n), HeaderValue::from_static(v));
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(media)),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
            // Files change with the binary: ask again each time.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            h("cross-origin-opener-policy", "same-origin"),
        ],
        body,
    )
        .into_response()
}

#[utoipa::path(
    get,
    path = "/ui",
    tag = tags::BERTH,
    summary = "The web console (calendar, leases, hosts, live log, manager, quotas)",
    responses(
        (status = 200, description = "The console's page", body = String, content_type = "text/html"),
    ),
)]
async fn page(State(state): State<AppState>, MaybeAnonymous(ctx): MaybeAnonymous) -> Result<Response, ApiError> {
    state.rules.authorize(&ctx, Action::ConsoleAssets, &Target::own(&ctx))?;
    Ok(guarded(ASSETS[0].1, ASSETS[0].2))
}

#[utoipa::path(
    get,
    path = "/ui/{file}",
    tag = tags::BERTH,
    summary = "A file of the console (its scripts and style)",
    params(("file" = String, Path, description = "index.html, console.css, console.js, ...")),
    responses(
        (status = 200, description = "The file", content(
            (String = "text/javascript"), (String = "text/css"), (String = "text/html"),
        )),
    ),
)]
async fn file(
    State(state): State<AppState>,
    MaybeAnonymous(ctx): MaybeAnonymous,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    state.rules.authorize(&ctx, Action::ConsoleAssets, &Target::own(&ctx))?;
    let (_, media, body) = ASSETS.iter().find(|(n, _, _)| *n == name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            berth_core::error::ErrorCode::NotFound,
            format!("no console file {name:?}"),
        )
    })?;
    Ok(guarded(media, body))
}
