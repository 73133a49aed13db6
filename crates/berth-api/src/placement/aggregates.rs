//! `/resource_providers/{uuid}/aggregates` (1.1 on; generations from 1.19).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::Rule;
use berth_core::error::ErrorCode;
use serde_json::{json, Value};
use uuid::Uuid;

use super::bodies;
use super::http::{body_value, conflict, served_now, Pl};
use super::providers::provider_uuid;
use super::schemas;
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
    let (app, may) = p.may(&s, Rule::AggregatesList)?;
    let uuid = provider_uuid(&raw)?;
    let (rp, aggregates) = app.placement().aggregates().of_provider(&may, uuid).await?;
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
    let (app, may) = p.may(&s, Rule::AggregatesUpdate)?;
    let rp = app.placement().provider(&may, provider_uuid(&raw)?).await?;
    let (given, expected) = asked(&p, &bytes)?;
    let with_generation = p.mv.aggregates_generation();
    let set: BTreeSet<Uuid> = given.iter().copied().collect();
    let replaced = app.placement().aggregates().replace(&may, &rp, expected, set, with_generation).await;
    let generation = replaced.map_err(|e| match e {
        berth_app::Error::Domain(e) if e.code == ErrorCode::ConcurrentUpdate => stale(),
        e => e.into(),
    })?;
    Ok(p.json(StatusCode::OK, &aggregates_json(&p, &given, generation), served_now()))
}

/// The aggregates a body gives, in its order (Placement echoes them so),
/// and the generation it names (1.19 on).
fn asked(p: &Pl, bytes: &[u8]) -> Result<(Vec<Uuid>, Option<i64>), ApiError> {
    let body = body_value(bytes, &schemas::aggregates(p.mv))?;
    let (list, expected) = if p.mv.aggregates_generation() {
        (&body["aggregates"], body["resource_provider_generation"].as_i64())
    } else {
        (&body, None)
    };
    let given =
        list.as_array().into_iter().flatten().filter_map(|a| a.as_str()).filter_map(|a| Uuid::try_parse(a).ok());
    Ok((given.collect(), expected))
}

fn stale() -> ApiError {
    conflict(
        ErrorCode::ConcurrentUpdate,
        "Resource provider's generation already changed. Please update the generation and try again.",
    )
}
