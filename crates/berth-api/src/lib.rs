//! berth-api: Berth over HTTP.
//!
//! The OpenStack Placement API under `/placement`, the Blazar v1 lease API
//! and Berth's additions under `/v1`, the root version document, health
//! probes, metrics and the OpenAPI document. Handlers are small: parse,
//! call one store command or query, map its typed error to a response.
//!
//! This crate knows HTTP and nothing of SQL: everything durable goes through
//! berth-store.

#![warn(clippy::arithmetic_side_effects)]

pub mod auth;
mod blazar;
pub mod error;
mod events;
pub mod log;
pub mod metrics;
pub mod openapi;
pub mod placement;
mod quotas;
mod root;

use std::sync::Arc;

use axum::Router;
use berth_store::Store;

pub use auth::AuthMode;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub auth: Arc<AuthMode>,
    /// The enabled resource plugins, by reservation type.
    pub plugins: Arc<berth_plugins::Registry>,
    /// The lease policy beside quotas.
    pub policy: Arc<berth_plugins::Policy>,
}

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(root::routes())
        .nest("/v1", blazar::routes())
        .merge(placement::routes(&state))
        .merge(quotas::routes())
        .merge(events::routes())
        .merge(log::routes())
        .merge(metrics::routes())
        .layer(axum::middleware::from_fn(error::request_id))
        .with_state(state)
}
