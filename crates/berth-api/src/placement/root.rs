//! `GET /placement/`: the version document.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::bodies;
use super::http::{served_now, Pl};
use super::microversion::{MAX, MIN};
use crate::tags;

#[utoipa::path(
    get,
    path = "/placement/",
    tag = tags::PLACEMENT,
    summary = "Placement version document",
    responses(
        (status = 200, description = "The versions", body = bodies::Versions),
    ),
)]
pub async fn home(p: Pl) -> Response {
    let body = json!({"versions": [{
        "id": format!("v{MIN}"),
        "max_version": MAX.to_string(),
        "min_version": MIN.to_string(),
        "status": "CURRENT",
        "links": [{"rel": "self", "href": ""}],
    }]});
    p.json(StatusCode::OK, &body, served_now())
}
