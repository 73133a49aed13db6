//! `GET /allocation_candidates` (1.10 on).

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::http::{err, Pl};
use crate::error::ApiError;
use crate::AppState;

pub async fn list(p: Pl, State(_s): State<AppState>, RawQuery(_raw): RawQuery) -> Result<Response, ApiError> {
    p.since(p.mv.allocation_candidates())?;
    p.accept_json()?;
    p.admin()?;
    Err(err(StatusCode::NOT_IMPLEMENTED, "allocation candidates are not implemented yet"))
}
