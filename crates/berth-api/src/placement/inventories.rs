//! `/resource_providers/{uuid}/inventories[/{class}]`.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::inventories::Capacity;
use berth_app::placement::Rule;
use berth_core::error::{ErrorCode, Refusal};
use berth_core::names::class_rank;
use berth_core::Inventory;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::bodies;
use super::http::{bad_request, body, conflict, domain, err, not_found, served_now, with_location, Pl};
use super::microversion::Version;
use super::providers::provider_uuid;
use super::schemas;
use crate::error::{public_detail, ApiError};
use crate::tags;
use crate::AppState;

pub fn inventory_json(inv: &Inventory) -> Map<String, Value> {
    let v = json!({
        "total": inv.total,
        "reserved": inv.reserved,
        "min_unit": inv.min_unit,
        "max_unit": inv.max_unit,
        "step_size": inv.step_size,
        "allocation_ratio": inv.allocation_ratio,
    });
    v.as_object().cloned().unwrap_or_default()
}

fn one_json(inv: &Inventory, generation: i64) -> Value {
    let mut m = inventory_json(inv);
    m.insert("resource_provider_generation".into(), json!(generation));
    Value::Object(m)
}

/// A provider's inventories, in Placement's order of classes.
fn all_json(invs: &BTreeMap<String, Inventory>, generation: i64) -> Value {
    let mut ordered: Vec<(&String, &Inventory)> = invs.iter().collect();
    ordered.sort_by(|a, b| class_rank(a.0).cmp(&class_rank(b.0)));
    let invs: Map<String, Value> =
        ordered.into_iter().map(|(c, i)| (c.clone(), Value::Object(inventory_json(i)))).collect();
    json!({"resource_provider_generation": generation, "inventories": invs})
}

/// What an inventory must leave to allocate at `mv`: something before
/// 1.26, nothing or more from 1.26.
fn capacity(mv: Version) -> Capacity {
    if mv.reserved_may_equal_total() {
        Capacity::NotNegative
    } else {
        Capacity::Positive
    }
}

/// Whether `e` refuses an inventory with nothing to allocate.
fn no_capacity(e: &berth_core::Error) -> bool {
    matches!(e.refusal.as_deref(), Some(Refusal::InventoryCapacity { .. }))
}

/// An operation's refusal, a domain one as `words` says it.
fn refusal(e: berth_app::Error, words: impl FnOnce(berth_core::Error) -> ApiError) -> ApiError {
    match e {
        berth_app::Error::Domain(e) => words(e),
        e => e.into(),
    }
}

fn generation_conflict() -> ApiError {
    conflict(ErrorCode::ConcurrentUpdate, "resource provider generation conflict")
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}/inventories",
    tag = tags::PLACEMENT,
    summary = "A provider's inventories",
    responses(
        (status = 200, description = "Its inventories by class", body = bodies::Inventories),
    ),
)]
pub async fn list(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::InventoriesList)?;
    let uuid = provider_uuid(&raw)?;
    let (rp, invs) = app.placement().inventories().of_provider(&may, uuid).await?;
    Ok(p.json(StatusCode::OK, &all_json(&invs, rp.generation), Some(rp.updated_at)))
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}/inventories/{resource_class}",
    tag = tags::PLACEMENT,
    summary = "One inventory",
    responses(
        (status = 200, description = "The inventory", body = bodies::InventoryAt),
    ),
)]
pub async fn show(
    p: Pl,
    State(s): State<AppState>,
    Path((raw, class)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::InventoriesShow)?;
    let uuid = provider_uuid(&raw)?;
    let (rp, invs) = app.placement().inventories().of_provider(&may, uuid).await?;
    let inv = invs.get(&class).ok_or_else(|| not_found(format!("No inventory of class {class} for {uuid}")))?;
    Ok(p.json(StatusCode::OK, &one_json(inv, rp.generation), Some(rp.updated_at)))
}

#[utoipa::path(
    post,
    path = "/placement/resource_providers/{uuid}/inventories",
    tag = tags::PLACEMENT,
    summary = "Add one inventory",
    request_body = bodies::NewInventory,
    responses(
        (status = 201, description = "The inventory", body = bodies::InventoryAt),
    ),
)]
pub async fn create(
    p: Pl,
    State(s): State<AppState>,
    Path(raw): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::InventoriesCreate)?;
    let rp = app.placement().provider(&may, provider_uuid(&raw)?).await?;
    let record: bodies::NewInventory = body(&bytes, &schemas::create_inventory())?;
    let (class, inv, uuid) = (record.resource_class, record.sizes.inventory(), rp.uuid);
    let unable = format!("Unable to create inventory for resource provider {uuid}: ");
    let added = app.placement().inventories().add(&may, &rp, &class, inv, capacity(p.mv)).await;
    let generation = added.map_err(|e| {
        refusal(e, |e| match e.code {
            ErrorCode::InventoryExists => {
                conflict(ErrorCode::ConcurrentUpdate, format!("Update conflict: {}", public_detail(&e)))
            }
            ErrorCode::ResourceClassNotFound => domain(e, &unable),
            _ if no_capacity(&e) => domain(e, &unable),
            _ => ApiError::from(e),
        })
    })?;
    let resp = p.json(StatusCode::CREATED, &one_json(&inv, generation), served_now());
    Ok(with_location(resp, &p.location(&format!("/resource_providers/{uuid}/inventories/{class}"))))
}

#[utoipa::path(
    put,
    path = "/placement/resource_providers/{uuid}/inventories",
    tag = tags::PLACEMENT,
    summary = "Replace a provider's inventories",
    request_body = bodies::InventoriesChange,
    responses(
        (status = 200, description = "Its inventories by class", body = bodies::Inventories),
    ),
)]
pub async fn replace(
    p: Pl,
    State(s): State<AppState>,
    Path(raw): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::InventoriesUpdate)?;
    let rp = app.placement().provider(&may, provider_uuid(&raw)?).await?;
    let req: bodies::InventoriesChange = body(&bytes, &schemas::replace_inventories())?;
    let invs: BTreeMap<String, Inventory> =
        req.inventories.iter().map(|(c, r)| (c.clone(), r.sizes.inventory())).collect();
    let expected = req.resource_provider_generation;
    let replaced = app.placement().inventories().replace(&may, &rp, expected, invs.clone(), capacity(p.mv)).await;
    let generation = replaced.map_err(|e| refusal(e, |e| replace_error(e, rp.uuid)))?;
    Ok(p.json(StatusCode::OK, &all_json(&invs, generation), served_now()))
}

/// A replacement's refusals in Placement's words.
fn replace_error(e: berth_core::Error, uuid: Uuid) -> ApiError {
    match e.code {
        _ if no_capacity(&e) => domain(e, &format!("Unable to update inventory for resource provider {uuid}: ")),
        ErrorCode::ResourceClassNotFound => {
            domain(e, &format!("Unknown resource class in inventory for resource provider {uuid}: "))
        }
        ErrorCode::InventoryInUse => domain(e, "update conflict: "),
        ErrorCode::ConcurrentUpdate => generation_conflict(),
        _ => ApiError::from(e),
    }
}

#[utoipa::path(
    put,
    path = "/placement/resource_providers/{uuid}/inventories/{resource_class}",
    tag = tags::PLACEMENT,
    summary = "Update one inventory",
    request_body = bodies::InventoryRecord,
    responses(
        (status = 200, description = "The inventory", body = bodies::InventoryAt),
    ),
)]
pub async fn update(
    p: Pl,
    State(s): State<AppState>,
    Path((raw, class)): Path<(String, String)>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::InventoriesUpdate)?;
    let rp = app.placement().provider(&may, provider_uuid(&raw)?).await?;
    let record: bodies::InventoryRecord = body(&bytes, &schemas::update_inventory())?;
    let (expected, inv) = (record.resource_provider_generation.unwrap_or_default(), record.sizes.inventory());
    let updated = app.placement().inventories().update(&may, &rp, expected, (&class, inv), capacity(p.mv)).await;
    let generation = updated.map_err(|e| refusal(e, |e| update_error(e, rp.uuid)))?;
    Ok(p.json(StatusCode::OK, &one_json(&inv, generation), served_now()))
}

/// An update's refusals in Placement's words.
fn update_error(e: berth_core::Error, uuid: Uuid) -> ApiError {
    match e.code {
        ErrorCode::InventoryNotFound => bad_request(format!(
            "No inventory record with resource class for resource provider {uuid}: {}",
            public_detail(&e)
        )),
        ErrorCode::ConcurrentUpdate => generation_conflict(),
        _ => domain(e, &format!("Unable to update inventory for resource provider {uuid}: ")),
    }
}

#[utoipa::path(
    delete,
    path = "/placement/resource_providers/{uuid}/inventories/{resource_class}",
    tag = tags::PLACEMENT,
    summary = "Delete one inventory",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete(
    p: Pl,
    State(s): State<AppState>,
    Path((raw, class)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (app, may) = p.may(&s, Rule::InventoriesDelete)?;
    let rp = app.placement().provider(&may, provider_uuid(&raw)?).await?;
    let deleted = app.placement().inventories().delete(&may, rp.uuid, &class).await;
    deleted.map_err(|e| {
        refusal(e, |e| match e.code {
            ErrorCode::InventoryNotFound => {
                not_found(format!("No inventory of class {class} found for delete: {}", public_detail(&e)))
            }
            ErrorCode::InventoryInUse => domain(e, &format!("Unable to delete inventory of class {class}: ")),
            _ => ApiError::from(e),
        })
    })?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}

#[utoipa::path(
    delete,
    path = "/placement/resource_providers/{uuid}/inventories",
    tag = tags::PLACEMENT,
    summary = "Delete all inventories (1.5 on)",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete_all(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    if !p.mv.delete_all_inventories() {
        return Err(err(StatusCode::METHOD_NOT_ALLOWED, "The method DELETE is not allowed for this resource."));
    }
    let (app, may) = p.may(&s, Rule::InventoriesDelete)?;
    let rp = app.placement().provider(&may, provider_uuid(&raw)?).await?;
    app.placement().inventories().delete_all(&may, rp.uuid).await?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}
