//! `/allocations/{consumer}`, `POST /allocations` (1.13 on) and
//! `/resource_providers/{uuid}/allocations`. Allocations written here hold
//! from now, open-ended; reads show what is held now.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::allocations::{Claim, ConsumerView, GenerationCheck, Hold, ProviderAllocation};
use berth_app::placement::{Provider, Rule};
use berth_core::error::{ErrorCode, ErrorKind};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::bodies;
use super::http::{bad_request, domain, served_now, Pl};
use super::microversion::Version;
use super::providers::provider_uuid;
use super::schemas;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// The owner Placement records for consumers written without one (before 1.8).
pub const INCOMPLETE_CONSUMER: &str = "00000000-0000-0000-0000-000000000000";

/// One consumer's allocations as 1.12 and later write them (PUT, each entry
/// of POST and of the reshaper).
pub use bodies::AllocationsChange as ConsumerBody;

/// Before 1.12: a list of provider/resources pairs.
#[derive(Debug, Deserialize)]
struct ListBody {
    allocations: Vec<ListItem>,
    project_id: Option<String>,
    user_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ListItem {
    resource_provider: ListProvider,
    resources: IndexMap<String, i64>,
}

#[derive(Debug, Deserialize)]
struct ListProvider {
    uuid: String,
}

fn missing_provider(raw: &str) -> ApiError {
    bad_request(format!("Allocation for resource provider '{raw}' that does not exist."))
}

fn malformed_consumer(raw: &str) -> ApiError {
    bad_request(format!("Malformed consumer_uuid: {raw}"))
}

/// A request's allocations, in the request's order (which the answers keep).
fn holds(by_provider: impl IntoIterator<Item = (String, IndexMap<String, i64>)>) -> Result<Vec<Hold>, ApiError> {
    let mut out = Vec::new();
    for (raw, resources) in by_provider {
        let provider = Uuid::try_parse(&raw).map_err(|_| missing_provider(&raw))?;
        for (resource_class, used) in resources {
            out.push(Hold { provider, resource_class, used });
        }
    }
    Ok(out)
}

impl bodies::AllocationsChange {
    /// The claim of `consumer` this body asks for at `mv`.
    pub fn into_claim(self, mv: Version, consumer: Uuid) -> Result<Claim, ApiError> {
        let generation = if mv.consumer_generations() {
            self.consumer_generation.map(GenerationCheck::Exactly).unwrap_or(GenerationCheck::New)
        } else {
            GenerationCheck::Any
        };
        Ok(Claim {
            consumer,
            project_id: self.project_id.unwrap_or_else(|| INCOMPLETE_CONSUMER.into()),
            user_id: self.user_id.unwrap_or_else(|| INCOMPLETE_CONSUMER.into()),
            consumer_type: self.consumer_type,
            generation,
            holds: holds(self.allocations.into_iter().map(|(p, r)| (p, r.resources)))?,
        })
    }
}

/// The claim a `PUT` body asks for: a dict from 1.12, a list before.
fn claim_of(p: &Pl, consumer: Uuid, bytes: &[u8]) -> Result<Claim, ApiError> {
    if p.mv.dict_allocations() {
        let b: ConsumerBody = p.body(bytes, schemas::PUT_ALLOCATIONS.get(p.mv))?;
        return b.into_claim(p.mv, consumer);
    }
    let b: ListBody = p.body(bytes, schemas::ALLOCATIONS_LIST.get(p.mv))?;
    Ok(Claim {
        consumer,
        project_id: b.project_id.unwrap_or_else(|| INCOMPLETE_CONSUMER.into()),
        user_id: b.user_id.unwrap_or_else(|| INCOMPLETE_CONSUMER.into()),
        consumer_type: None,
        generation: GenerationCheck::Any,
        holds: holds(b.allocations.into_iter().map(|i| (i.resource_provider.uuid, i.resources)))?,
    })
}

/// Consumers keyed by UUID (POST /allocations, the reshaper) into claims.
pub fn claims(mv: Version, consumers: IndexMap<String, ConsumerBody>) -> Result<Vec<Claim>, ApiError> {
    consumers
        .into_iter()
        .map(|(raw, b)| b.into_claim(mv, Uuid::try_parse(&raw).map_err(|_| malformed_consumer(&raw))?))
        .collect()
}

/// A write's errors as Placement words them.
pub fn write_error(e: berth_app::Error, unknown_prefix: &str) -> ApiError {
    let berth_app::Error::Domain(e) = e else { return e.into() };
    match e.kind {
        _ if e.code == ErrorCode::ProviderNotFound => ApiError::from(e),
        ErrorKind::Invalid | ErrorKind::NotFound => domain(e, unknown_prefix),
        ErrorKind::Capacity | ErrorKind::InUse => domain(e, "Unable to allocate inventory: "),
        _ => ApiError::from(e),
    }
}

/// A consumer's allocations as `GET` shows them at `mv` (none: empty).
fn consumer_json(mv: Version, view: Option<&ConsumerView>) -> Value {
    let Some(view) = view else { return json!({"allocations": {}}) };
    // Providers by their first allocation, classes in allocation order: the
    // order the consumer's allocations were asked for, as the view has them.
    let mut by_provider: IndexMap<Uuid, (i64, Map<String, Value>)> = IndexMap::new();
    for (provider, generation, class, used) in &view.allocations {
        by_provider.entry(*provider).or_insert_with(|| (*generation, Map::new())).1.insert(class.clone(), json!(used));
    }
    let allocations: Map<String, Value> =
        by_provider.into_iter().map(|(p, (g, r))| (p.to_string(), json!({"generation": g, "resources": r}))).collect();
    let mut out = json!({"allocations": allocations});
    if mv.dict_allocations() {
        out["project_id"] = json!(view.project_id);
        out["user_id"] = json!(view.user_id);
        if mv.consumer_generations() {
            out["consumer_generation"] = json!(view.generation);
        }
        if mv.consumer_types() {
            out["consumer_type"] = json!(view.consumer_type.as_deref().unwrap_or("unknown"));
        }
    }
    out
}

/// A provider's allocations by consumer, as shown at `mv`.
fn provider_allocations_json(mv: Version, rp: &Provider, rows: Vec<ProviderAllocation>) -> Value {
    let mut allocations: Map<String, Value> = Map::new();
    for r in rows {
        let entry = allocations.entry(r.consumer.to_string()).or_insert_with(|| json!({"resources": {}}));
        entry["resources"][&r.resource_class] = json!(r.used);
        if mv.consumer_generations() {
            entry["consumer_generation"] = json!(r.consumer_generation);
        }
    }
    json!({"resource_provider_generation": rp.generation, "allocations": allocations})
}

#[utoipa::path(
    get,
    path = "/placement/allocations/{consumer_uuid}",
    tag = tags::PLACEMENT,
    summary = "A consumer's allocations",
    responses(
        (status = 200, description = "Its allocations by provider; empty for an unknown consumer", body = bodies::ConsumerAllocations),
    ),
)]
pub async fn show(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::AllocationsList)?;
    let now = served_now();
    let view = match Uuid::try_parse(&raw) {
        Ok(consumer) => app.placement().allocations().of_consumer(&may, consumer).await?,
        Err(_) => None,
    };
    Ok(p.json(StatusCode::OK, &consumer_json(p.mv, view.as_ref()), now))
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}/allocations",
    tag = tags::PLACEMENT,
    summary = "Allocations on a provider now",
    responses(
        (status = 200, description = "By consumer", body = bodies::ProviderAllocations),
    ),
)]
pub async fn of_provider(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ProviderAllocations)?;
    let uuid = provider_uuid(&raw)?;
    let (rp, rows) = app.placement().allocations().of_provider(&may, uuid).await?;
    Ok(p.json(StatusCode::OK, &provider_allocations_json(p.mv, &rp, rows), served_now()))
}

#[utoipa::path(
    put,
    path = "/placement/allocations/{consumer_uuid}",
    tag = tags::PLACEMENT,
    summary = "Replace a consumer's allocations (claim, move, resize) at once",
    description = "With `consumer_type` PREEMPTIBLE (1.38 on), a Berth loan: the capacity is lent while idle and \
        reclaimed through the plugins a lead before an owner needs it (docs/lending.md).",
    request_body = bodies::AllocationsChange,
    responses(
        (status = 204, description = "Claimed, or lent"),
        (status = 409, description = "No capacity; for a loan, `berth.lend.no_idle_capacity` or `berth.lend.consumer_kind`"),
    ),
)]
pub async fn put(
    p: Pl,
    State(s): State<AppState>,
    Path(raw): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::AllocationsUpdate)?;
    let consumer = Uuid::try_parse(&raw).map_err(|_| malformed_consumer(&raw))?;
    let claim = claim_of(&p, consumer, &bytes)?;
    let prefix = format!("Unable to allocate inventory for consumer {consumer}: ");
    app.placement().allocations().claim(&may, claim).await.map_err(|e| write_error(e, &prefix))?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}

#[utoipa::path(
    post,
    path = "/placement/allocations",
    tag = tags::PLACEMENT,
    summary = "Replace several consumers' allocations at once",
    request_body = bodies::ManyAllocations,
    responses(
        (status = 204, description = "Claimed"),
    ),
)]
pub async fn post_many(p: Pl, State(s): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    p.since(p.mv.post_allocations())?;
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::AllocationsManage)?;
    let consumers = p.body::<bodies::ManyAllocations>(&bytes, schemas::POST_ALLOCATIONS.get(p.mv))?.0;
    let claims = claims(p.mv, consumers)?;
    let claimed = app.placement().allocations().claim_many(&may, claims).await;
    claimed.map_err(|e| write_error(e, "Unable to allocate inventory "))?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}

#[utoipa::path(
    delete,
    path = "/placement/allocations/{consumer_uuid}",
    tag = tags::PLACEMENT,
    summary = "Delete a consumer's allocations",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    let (app, may) = p.may(&s, Rule::AllocationsDelete)?;
    let Ok(consumer) = Uuid::try_parse(&raw) else {
        return Err(super::http::not_found(format!("No allocations for consumer '{raw}'")));
    };
    app.placement().allocations().delete(&may, consumer).await?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}
