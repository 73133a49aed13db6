//! `GET /allocation_candidates` (1.10 on): the request read from the query
//! string ([`super::candidate_query`]), the search, the answer written for
//! the microversion as the search walks ([`candidate_stream`]).

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use berth_app::placement::Rule;
use berth_core::error::ErrorCode;

use super::bodies;
use super::candidate_query::request;
use super::http::{domain, served_now, Pl, Query};
use super::{candidate_stream, schemas};
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

#[utoipa::path(
    get,
    path = "/placement/allocation_candidates",
    tag = tags::PLACEMENT,
    summary = "Where a request would fit, now and open-ended",
    params(
        ("resources" = Option<String>, Query, description = "`CLASS:N,...`; also `resources{suffix}` for a request group (1.25 on)"),
        ("required" = Option<String>, Query, description = "Traits, `!T` forbidden, `in:A,B` any of; also per group"),
        ("member_of" = Option<String>, Query, description = "Aggregates; also per group"),
        ("in_tree" = Option<String>, Query, description = "In this provider's tree (1.31 on); also per group"),
        ("limit" = Option<u32>, Query, minimum = 1, description = "At most this many allocation requests (1.16 on)"),
        ("group_policy" = Option<String>, Query, description = "`none` or `isolate` (1.25 on)"),
        ("root_required" = Option<String>, Query, description = "Traits of the root provider (1.35 on)"),
        ("same_subtree" = Option<String>, Query, description = "Group suffixes that share a subtree (1.36 on)"),
    ),
    responses(
        (status = 200, description = "Allocation requests and provider summaries", body = bodies::Candidates),
    ),
)]
pub async fn list(
    p: Pl,
    State(s): State<AppState>,
    Extension(config): Extension<Arc<ApiConfig>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    p.since(p.mv.allocation_candidates())?;
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::AllocationCandidates)?;
    let q = Query::parse(raw.as_deref());
    q.validate(&schemas::candidates(p.mv))?;
    let mut req = request(&q, p.mv)?;
    req.limit = Some(req.limit.unwrap_or(usize::MAX).min(config.max_allocation_candidates));
    let found = app.placement().candidates().search(&may, req).await.map_err(|e| match e {
        berth_app::Error::Domain(e) if e.code == ErrorCode::ResourceClassNotFound => {
            domain(e, "Invalid resource class in resources parameter: ")
        }
        e => e.into(),
    })?;
    let limit = std::time::Duration::from_secs(config.request_timeout_s);
    Ok(p.json_stream(StatusCode::OK, candidate_stream::body(found, p.mv, limit), served_now()))
}
