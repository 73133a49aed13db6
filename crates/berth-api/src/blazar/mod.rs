//! The Blazar v1 reservation API under `/v1`: leases and hosts in the shapes
//! Blazar's public API reference and its client use, with Berth's additions
//! (availability advice, offers, lease extension limits). Errors are Blazar's
//! document, plus `code` and `request_id`.

mod availability;
mod bodies;
mod host_lists;
mod hosts;
mod idempotency;
mod leases;
mod loans;
mod maintenance;
mod offers;
mod plugins;
mod read;

use axum::http::StatusCode;
use axum::routing::{get, patch, post};
use axum::Router;
use berth_core::error::ErrorCode;

use crate::error::ApiError;
use crate::AppState;

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(
        leases::list,
        leases::create,
        leases::show,
        leases::update,
        leases::delete,
        leases::control::end,
        leases::control::recover,
        leases::share::share,
        leases::share::shared,
        leases::transfer::split,
        leases::transfer::transfer,
        leases::transfer::accept,
        leases::transfer::withdraw,
        host_lists::list,
        hosts::create,
        hosts::show,
        hosts::update,
        hosts::delete,
        host_lists::allocations,
        hosts::allocation,
        host_lists::properties,
        hosts::set_property,
        availability::advise,
        availability::extension,
        offers::offer,
        plugins::list,
        plugins::schema,
        maintenance::create,
        maintenance::list,
        loans::list,
        maintenance::delete,
    ))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/leases", get(leases::list).post(leases::create))
        .route("/leases/shared", get(leases::share::shared))
        .route("/leases/{id}/shared_with", axum::routing::put(leases::share::share))
        .route("/leases/{id}", get(leases::show).put(leases::update).delete(leases::delete))
        .route("/leases/{id}/extension", get(availability::extension))
        .route("/leases/{id}/end", post(leases::control::end))
        .route("/leases/{id}/recover", post(leases::control::recover))
        .route("/leases/{id}/split", post(leases::transfer::split))
        .route("/leases/{id}/transfer", post(leases::transfer::transfer).delete(leases::transfer::withdraw))
        .route("/leases/{id}/transfer/accept", post(leases::transfer::accept))
        .route("/availability", post(availability::advise))
        .route("/offers", post(offers::offer))
        .route("/os-hosts", get(host_lists::list).post(hosts::create))
        .route("/os-hosts/allocations", get(host_lists::allocations))
        .route("/os-hosts/properties", get(host_lists::properties))
        .route("/os-hosts/properties/{name}", patch(hosts::set_property))
        .route("/os-hosts/{id}", get(hosts::show).put(hosts::update).delete(hosts::delete))
        .route("/os-hosts/{id}/allocation", get(hosts::allocation))
        .route("/maintenance", get(maintenance::list).post(maintenance::create))
        .route("/loans", get(loans::list))
        .route("/maintenance/{id}", axum::routing::delete(maintenance::delete))
        .route("/plugins", get(plugins::list))
        .route("/plugins/schema", get(plugins::schema))
}

/// A path id; anything that is not a uuid names nothing (404).
fn path_id(id: &str, what: &'static str, code: ErrorCode) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(id)
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, code, format!("{what} {id} could not be found")))
}
