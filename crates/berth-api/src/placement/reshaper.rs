//! `POST /reshaper` (1.30 on): inventories and allocations of several
//! providers and consumers replaced together.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::reshaper::ProviderInventories;
use berth_app::placement::Rule;
use berth_core::error::{ErrorCode, ErrorKind};
use uuid::Uuid;

use super::allocations::claims;
use super::bodies;
use super::http::{bad_request, body, domain, Pl};
use super::schemas;
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
    let (app, may) = p.may(&s, Rule::Reshape)?;
    let req: bodies::Reshape = body(&bytes, &schemas::reshaper(p.mv))?;
    let inventories = inventories(req.inventories)?;
    let claims = claims(p.mv, req.allocations)?;
    app.placement().reshaper().reshape(&may, inventories, claims).await.map_err(reshape_error)?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}

/// The providers' inventories a reshape leaves.
fn inventories(by_provider: BTreeMap<String, bodies::InventoriesChange>) -> Result<Vec<ProviderInventories>, ApiError> {
    let mut out = Vec::new();
    for (raw, pi) in by_provider {
        let provider = Uuid::try_parse(&raw).map_err(|_| bad_request(format!("bad uuid {raw}")))?;
        let inventories = pi.inventories.into_iter().map(|(class, r)| (class, r.sizes.inventory())).collect();
        out.push(ProviderInventories { provider, expected_generation: pi.resource_provider_generation, inventories });
    }
    Ok(out)
}

/// A reshape's refusals in Placement's words.
fn reshape_error(e: berth_app::Error) -> ApiError {
    let berth_app::Error::Domain(e) = e else { return e.into() };
    match (e.kind, e.code) {
        (_, ErrorCode::ResourceClassNotFound) => domain(e, "malformed reshaper data: "),
        (_, ErrorCode::InventoryInUse) => domain(e, "update conflict: "),
        (ErrorKind::Capacity, _) => domain(e, "Unable to allocate inventory: "),
        _ => ApiError::from(e),
    }
}
