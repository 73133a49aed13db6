//! berth-api: Berth over HTTP.
//!
//! The OpenStack Placement API under `/placement`, the Blazar v1 lease API
//! and Berth's additions under `/v1`, the root version document, health
//! probes, metrics and the OpenAPI document. Handlers are small: parse,
//! call one operation (berth-app's, for the Blazar leases and hosts routes;
//! elsewhere still one store command or query), render its result or map
//! its typed error to a response.
//!
//! This crate knows HTTP and nothing of SQL: everything durable goes through
//! berth-app or berth-store.

#![warn(clippy::arithmetic_side_effects)]

pub mod access;
pub mod access_log;
pub mod auth;
mod blazar;
pub mod clock;
pub mod config;
mod console;
mod controls;
pub mod error;
mod events;
mod events_stream;
mod gate;
mod heal;
mod input;
pub mod log;
pub mod metrics;
pub mod openapi;
mod paging;
pub mod placement;
mod quotas;
pub mod reads;
mod refusals;
mod root;
mod serve;
mod streams;
mod tags;
pub mod tls;
mod whole;
mod wording;

use std::sync::Arc;

pub use access::Rules;
pub use auth::{AuthMode, Authenticator};
use axum::extract::DefaultBodyLimit;
use axum::{Extension, Router};
pub use config::ApiConfig;
pub use serve::serve;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The use cases, over the store, the enabled resource plugins and
    /// the lease policy: the only way a handler reaches them.
    pub app: berth_app::App,
    /// Who is calling.
    pub auth: Arc<Authenticator>,
    /// What each caller may do.
    pub rules: Arc<Rules>,
    /// This process's clock against the database's (for `/readyz`).
    pub clock: clock::ClockWatch,
    /// What `/` says berthd is.
    pub build: Build,
}

/// The build serving: its version and the commit it was built from.
#[derive(Debug, Clone, Copy)]
pub struct Build {
    pub version: &'static str,
    pub commit: &'static str,
}

impl Default for Build {
    /// This crate's version; the commit is the binary's to say.
    fn default() -> Build {
        Build { version: env!("CARGO_PKG_VERSION"), commit: "unknown" }
    }
}

/// The whole HTTP surface, with the default [`ApiConfig`].
pub fn router(state: AppState) -> Router {
    router_with(state, ApiConfig::default())
}

/// The whole HTTP surface under `config`'s bounds. Every request passes
/// the input checks ([`input`]) before any handler, and every refusal is a
/// document in its API's format ([`refusals`]).
pub fn router_with(state: AppState, config: ApiConfig) -> Router {
    let timeout = std::time::Duration::from_secs(config.request_timeout_s);
    Router::new()
        .merge(root::routes())
        .merge(openapi::router())
        .nest("/v1", blazar::routes())
        .merge(placement::routes(&state))
        .merge(quotas::routes())
        .merge(events::routes())
        .merge(controls::routes())
        .merge(log::routes())
        .merge(metrics::routes())
        .merge(console::routes())
        .fallback(refusals::no_route)
        .layer(axum::middleware::from_fn_with_state(timeout, refusals::deadline))
        // Live streams follow the primary.
        .layer(axum::middleware::from_fn_with_state(state.clone(), reads::route))
        // Live streams last as long as the client listens.
        .merge(log::stream_routes())
        .merge(events_stream::routes())
        // The input check reads the body under the configured limit.
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn(input::check))
        .layer(axum::middleware::from_fn(refusals::as_documents))
        .layer(Extension(Arc::new(config)))
        .layer(Extension(Arc::new(streams::Streams::default())))
        // Per route (so the matched route is known), inside the request id.
        .layer(axum::middleware::from_fn(metrics::count_request))
        .layer(access_log::layer())
        .layer(axum::middleware::from_fn(error::request_id))
        .with_state(state)
}
