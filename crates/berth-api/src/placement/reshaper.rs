//! `POST /reshaper` (1.30 on): inventories and allocations of several
//! providers and consumers replaced together.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::inventory::MAX_AMOUNT;
use berth_core::Inventory;
use berth_store::commands::ReshapeInventory;
use serde::Deserialize;
use uuid::Uuid;

use super::allocations::{consumers_commands, ConsumerBody};
use super::bodies;
use super::http::{body, domain, Pl};
use super::schemas;
use crate::access::Action;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

#[derive(Deserialize)]
struct Body {
    inventories: BTreeMap<String, ProviderInventories>,
    allocations: indexmap::IndexMap<String, ConsumerBody>,
}

#[derive(Deserialize)]
struct ProviderInventories {
    resource_provider_generation: i64,
    inventories: BTreeMap<String, Record>,
}

#[derive(Deserialize)]
struct Record {
    total: i64,
    reserved: Option<i64>,
    min_unit: Option<i64>,
    max_unit: Option<i64>,
    step_size: Option<i64>,
    allocation_ratio: Option<f64>,
}

#[utoipa::path(
    post,
    path = "/placement/reshaper",
    tag = tags::PLACEMENT,
    summary = "Move inventories and allocations between providers at once",
    request_body = bodies::Reshape,
    responses(
        (status = 204, description = "Reshaped"),
    ),
)]
pub async fn reshape(p: Pl, State(s): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    p.since(p.mv.reshaper())?;
    p.json_content()?;
    p.authorize(Action::Reshape)?;
    let req: Body = body(&bytes, &schemas::reshaper(p.mv))?;
    let mut inventories = Vec::new();
    for (raw, pi) in req.inventories {
        let provider = Uuid::try_parse(&raw).map_err(|_| super::http::bad_request(format!("bad uuid {raw}")))?;
        let invs = pi
            .inventories
            .into_iter()
            .map(|(class, r)| {
                let inv = Inventory {
                    total: r.total,
                    reserved: r.reserved.unwrap_or(0),
                    min_unit: r.min_unit.unwrap_or(1),
                    max_unit: r.max_unit.unwrap_or(MAX_AMOUNT),
                    step_size: r.step_size.unwrap_or(1),
                    allocation_ratio: r.allocation_ratio.unwrap_or(1.0),
                };
                (class, inv)
            })
            .collect();
        inventories.push(ReshapeInventory {
            provider,
            expected_generation: pi.resource_provider_generation,
            inventories: invs,
        });
    }
    let consumers = consumers_commands(p.mv, req.allocations, s.store.now().await?)?;
    s.store.reshape(&p.meta(), inventories, consumers).await.map_err(|e| match (e.kind, e.code) {
        (_, ErrorCode::ResourceClassNotFound) => domain(e, "malformed reshaper data: "),
        (_, ErrorCode::InventoryInUse) => domain(e, "update conflict: "),
        (ErrorKind::Capacity, _) => domain(e, "Unable to allocate inventory: "),
        _ => ApiError::from(e),
    })?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}
