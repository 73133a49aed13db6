//! `POST /reshaper` (1.30 on): inventories and allocations of several
//! providers and consumers replaced together.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use berth_core::error::{ErrorCode, ErrorKind};
use berth_store::commands::ReshapeInventory;
use uuid::Uuid;

use super::allocations::consumers_commands;
use super::bodies;
use super::http::{body, domain, Pl};
use super::schemas;
use crate::access::Action;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

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
    let req: bodies::Reshape = body(&bytes, &schemas::reshaper(p.mv))?;
    let mut inventories = Vec::new();
    for (raw, pi) in req.inventories {
        let provider = Uuid::try_parse(&raw).map_err(|_| super::http::bad_request(format!("bad uuid {raw}")))?;
        let invs = pi.inventories.into_iter().map(|(class, r)| (class, r.sizes.inventory())).collect();
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
