//! `/resource_providers/{uuid}/aggregates` (1.1 on; generations from 1.19).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_core::error::ErrorCode;
use serde_json::{json, Value};
use uuid::Uuid;

use super::bodies;
use super::http::{body_value, conflict, served_now, Pl};
use super::providers::provider_uuid;
use super::schemas;
use crate::access::Action;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

fn aggregates_json(p: &Pl, aggregates: &[Uuid], generation: i64) -> Value {
    let mut body = json!({"aggregates": aggregates});
    if p.mv.aggregates_generation() {
        body["resource_provider_generation"] = json!(generation);
    }
    body
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}/aggregates",
    tag = tags::PLACEMENT,
    summary = "A provider's aggregates",
    responses(
        (status = 200, description = "Its aggregates", body = bodies::Aggregates),
    ),
)]
pub async fn show(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.accept_json()?;
    p.since(p.mv.aggregates())?;
    p.authorize(Action::AggregatesList)?;
    let uuid = provider_uuid(&raw)?;
    let rp = s.store.placement_provider(uuid).await?;
    let aggregates = s.store.provider_aggregates(uuid).await?;
    Ok(p.json(StatusCode::OK, &aggregates_json(&p, &aggregates, rp.generation), served_now()))
}

#[utoipa::path(
    put,
    path = "/placement/resource_providers/{uuid}/aggregates",
    tag = tags::PLACEMENT,
    summary = "Replace a provider's aggregates",
    request_body = bodies::Aggregates,
    responses(
        (status = 200, description = "Its aggregates", body = bodies::Aggregates),
    ),
)]
pub async fn replace(
    p: Pl,
    State(s): State<AppState>,
    Path(raw): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.json_content()?;
    p.since(p.mv.aggregates())?;
    p.authorize(Action::AggregatesUpdate)?;
    let uuid = provider_uuid(&raw)?;
    let rp = s.store.placement_provider(uuid).await?;
    let body = body_value(&bytes, &schemas::aggregates(p.mv))?;
    let with_generation = p.mv.aggregates_generation();
    let (list, expected) = if with_generation {
        (&body["aggregates"], body["resource_provider_generation"].as_i64())
    } else {
        (&body, None)
    };
    let stale = || {
        conflict(
            ErrorCode::ConcurrentUpdate,
            "Resource provider's generation already changed. Please update the generation and try again.",
        )
    };
    if expected.is_some_and(|g| g != rp.generation) {
        return Err(stale());
    }
    // Kept in the order given, as Placement echoes them.
    let given: Vec<Uuid> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .filter_map(|a| Uuid::try_parse(a).ok())
        .collect();
    let set: BTreeSet<Uuid> = given.iter().copied().collect();
    let generation = s
        .store
        .replace_aggregates(&p.meta(), uuid, expected, set, with_generation)
        .await
        .map_err(|e| if e.code == ErrorCode::ConcurrentUpdate { stale() } else { ApiError::from(e) })?;
    Ok(p.json(StatusCode::OK, &aggregates_json(&p, &given, generation), served_now()))
}
