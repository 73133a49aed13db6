//! Reads from hot standbys and reading one's own writes.
//!
//! A GET's reads that may be slightly stale (the store's queries say which)
//! may be served by a standby within the lag bound (`read_database_urls`,
//! `max_replica_lag_ms`). A write's answer carries [`READ_AFTER`], the
//! primary's WAL position once it committed; a GET that sends it back is
//! served only by a standby that has replayed that far, or by the primary.
//! Without standbys configured, neither happens.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use berth_app::reads::{stale_ok, Lsn};

use crate::AppState;

/// The header of the read-your-write token, in a write's answer and a
/// GET's request.
pub const READ_AFTER: &str = "berth-read-after";

pub async fn route(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !state.app.reads().has_replicas() {
        return next.run(req).await;
    }
    if req.method() == Method::GET || req.method() == Method::HEAD {
        // A token that does not parse cannot be honoured by a standby: the
        // primary serves the read.
        let after = match req.headers().get(READ_AFTER).map(|v| v.to_str().ok().and_then(|t| t.parse::<Lsn>().ok())) {
            None => None,
            Some(Some(lsn)) => Some(lsn),
            Some(None) => return next.run(req).await,
        };
        return stale_ok(after, next.run(req)).await;
    }
    let mut resp = next.run(req).await;
    if resp.status().is_success() {
        // Read after the answer was made, so at or past its commit.
        match state.app.reads().write_token().await {
            Ok(lsn) => {
                if let Ok(v) = HeaderValue::from_str(&lsn.to_string()) {
                    resp.headers_mut().insert(READ_AFTER, v);
                }
            }
            Err(e) => tracing::warn!(error = %e, "no read-after token for a write"),
        }
    }
    resp
}
