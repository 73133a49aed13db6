//! The OpenStack Placement API, microversions 1.0 to 1.39, under `/placement`.
//!
//! A middleware negotiates the microversion, refuses anonymous callers
//! (except at the root), answers every response with the version headers,
//! and renders errors as HTML for clients that do not accept JSON. Handlers
//! are small: they check what Placement checks, in its order (asking the
//! caller's leave of `berth_app::placement` before the path or the body is
//! read), call one of its operations, and shape the answer for the
//! microversion.
//! All version-dependent behaviour is named in [`microversion`].

mod aggregates;
mod allocations;
mod bodies;
mod candidate_query;
mod candidate_stream;
mod candidates;
mod classes;
mod http;
mod inventories;
pub mod microversion;
mod params;
mod providers;
mod reshaper;
mod root;
mod schema;
mod schemas;
mod traits;
mod usages;

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use crate::auth::Context;
use crate::AppState;
use http::{accepts_json, err, PREFIX};
use microversion::{negotiate, VersionError};

/// The document of the Placement routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(
        root::home,
        providers::list,
        providers::create,
        providers::show,
        providers::update,
        providers::delete,
        inventories::list,
        inventories::replace,
        inventories::create,
        inventories::delete_all,
        inventories::show,
        inventories::update,
        inventories::delete,
        usages::provider,
        allocations::of_provider,
        traits::of_provider,
        traits::replace,
        traits::clear,
        aggregates::show,
        aggregates::replace,
        classes::list,
        classes::create,
        classes::show,
        classes::update,
        classes::delete,
        traits::list,
        traits::show,
        traits::create,
        traits::delete,
        allocations::show,
        allocations::put,
        allocations::delete,
        allocations::post_many,
        usages::totals,
        reshaper::reshape,
        candidates::list,
    ))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

/// The Placement routes, mounted at `/placement`.
pub fn routes(state: &AppState) -> Router<AppState> {
    let p = |path: &str| format!("{PREFIX}{path}");
    Router::new()
        .route(PREFIX, allow(get(root::home), "GET"))
        .route(&p("/"), allow(get(root::home), "GET"))
        .route(&p("/resource_classes"), allow(get(classes::list).post(classes::create), "GET, POST"))
        .route(
            &p("/resource_classes/{name}"),
            allow(get(classes::show).put(classes::update).delete(classes::delete), "GET, PUT, DELETE"),
        )
        .route(&p("/resource_providers"), allow(get(providers::list).post(providers::create), "GET, POST"))
        .route(
            &p("/resource_providers/{uuid}"),
            allow(get(providers::show).put(providers::update).delete(providers::delete), "GET, DELETE, PUT"),
        )
        .route(
            &p("/resource_providers/{uuid}/inventories"),
            allow(
                get(inventories::list)
                    .post(inventories::create)
                    .put(inventories::replace)
                    .delete(inventories::delete_all),
                "GET, POST, PUT, DELETE",
            ),
        )
        .route(
            &p("/resource_providers/{uuid}/inventories/{class}"),
            allow(get(inventories::show).put(inventories::update).delete(inventories::delete), "GET, PUT, DELETE"),
        )
        .route(&p("/resource_providers/{uuid}/usages"), allow(get(usages::provider), "GET"))
        .route(
            &p("/resource_providers/{uuid}/aggregates"),
            allow(get(aggregates::show).put(aggregates::replace), "GET, PUT"),
        )
        .route(&p("/resource_providers/{uuid}/allocations"), allow(get(allocations::of_provider), "GET"))
        .route(
            &p("/resource_providers/{uuid}/traits"),
            allow(get(traits::of_provider).put(traits::replace).delete(traits::clear), "GET, PUT, DELETE"),
        )
        .route(&p("/allocations"), allow(post(allocations::post_many), "POST"))
        .route(
            &p("/allocations/{consumer}"),
            allow(get(allocations::show).put(allocations::put).delete(allocations::delete), "GET, PUT, DELETE"),
        )
        .route(&p("/allocation_candidates"), allow(get(candidates::list), "GET"))
        .route(&p("/traits"), allow(get(traits::list), "GET"))
        .route(
            &p("/traits/{name}"),
            allow(get(traits::show).put(traits::create).delete(traits::delete), "GET, PUT, DELETE"),
        )
        .route(&p("/usages"), allow(get(usages::totals), "GET"))
        .route(&p("/reshaper"), allow(post(reshaper::reshape), "POST"))
        .route(&p("/{*rest}"), axum::routing::any(not_found))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
}

/// Answers other methods with 405 and Placement's `Allow` list.
fn allow(methods: MethodRouter<AppState>, allowed: &'static str) -> MethodRouter<AppState> {
    methods.fallback(move |method: Method| async move {
        let mut resp = err(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "The method {method} is not allowed for this resource.\n\n \
                 The method specified is not allowed for this resource."
            ),
        )
        .into_response();
        resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allowed));
        resp
    })
}

async fn not_found() -> Response {
    err(StatusCode::NOT_FOUND, "The resource could not be found.").into_response()
}

/// Version negotiation, authentication and the shape of every response.
async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let wants_json = accepts_json(req.headers().get(header::ACCEPT));
    let header_value = req.headers().get("openstack-api-version").and_then(|v| v.to_str().ok());
    let version = match negotiate(header_value) {
        Ok(v) => v,
        Err(VersionError::Invalid(m)) => {
            return shape(err(StatusCode::BAD_REQUEST, m).into_response(), wants_json).await
        }
        Err(VersionError::Unacceptable(m)) => {
            return shape(err(StatusCode::NOT_ACCEPTABLE, m).into_response(), wants_json).await
        }
    };
    let resp = admit(&state, req, version, next).await;
    let mut resp = shape(resp, wants_json).await;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("placement {version}")) {
        h.insert("openstack-api-version", v);
    }
    h.insert(header::VARY, HeaderValue::from_static("openstack-api-version"));
    resp
}

async fn admit(state: &AppState, req: Request, version: microversion::Version, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let rest = parts.uri.path().strip_prefix(PREFIX).unwrap_or("");
    let at_root = rest.is_empty() || rest == "/";
    // A body must say what it is.
    if let Some(len) = parts.headers.get(header::CONTENT_LENGTH) {
        match len.to_str().ok().and_then(|l| l.trim().parse::<u64>().ok()) {
            None => return err(StatusCode::BAD_REQUEST, "content-length header must be an integer").into_response(),
            Some(n) if n > 0 && !parts.headers.contains_key(header::CONTENT_TYPE) => {
                return err(StatusCode::BAD_REQUEST, "content-type header required when content-length > 0")
                    .into_response()
            }
            _ => {}
        }
    }
    // The version document is anonymous: no token is looked at there.
    if !at_root {
        if let Err(e) = Context::from_request_parts(&mut parts, state).await {
            return e.placement().into_response();
        }
    }
    parts.extensions.insert(version);
    next.run(Request::from_parts(parts, body)).await
}

/// Errors go out as Placement's JSON document, or as a small HTML page to
/// clients that do not accept JSON.
async fn shape(resp: Response, wants_json: bool) -> Response {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if wants_json || resp.status().as_u16() < 400 || !is_json {
        return resp;
    }
    let status = resp.status();
    let (mut parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let detail = doc["errors"][0]["detail"].as_str().unwrap_or("").to_string();
    let title = status.canonical_reason().unwrap_or("Error");
    let html = format!(
        "<html>\n <head>\n  <title>{code} {title}</title>\n </head>\n <body>\n  <h1>{code} {title}</h1>\n  {detail}<br /><br />\n\n\n\n </body>\n</html>",
        code = status.as_u16(),
        detail = escape_html(&detail)
    );
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=UTF-8"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(html))
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
