//! The instance check: the consumers a reservation names for its hooks
//! must be the caller's project's.

use axum::http::StatusCode;
use berth_core::error::ErrorCode;
use berth_store::commands::NewReservation;
use uuid::Uuid;

use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::AppState;

/// The consumers the reservations name for their hooks (instances to wake
/// up and delete) must be the caller's project's in Placement, unless the
/// rules let the caller name any (admins): a hook must never act on what
/// another project owns.
pub(super) async fn check(state: &AppState, ctx: &Context, list: &[NewReservation]) -> Result<(), ApiError> {
    if state.rules.allows(ctx, Action::LeasesNameAnyInstance, &Target::own(ctx)) {
        return Ok(());
    }
    let mut named = Vec::new();
    for r in list {
        for id in state.plugins.get(&r.resource_type)?.named_consumers(&r.params) {
            let uuid = Uuid::parse_str(&id).map_err(|_| unknown_consumer(&id))?;
            named.push((id, uuid));
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    let uuids: Vec<Uuid> = named.iter().map(|(_, u)| *u).collect();
    let projects = state.store.consumer_projects(&uuids).await?;
    for (id, uuid) in &named {
        match projects.get(uuid) {
            None => return Err(unknown_consumer(id)),
            Some(p) if *p != ctx.project_id => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::ForeignInstance,
                    format!("instance {id} belongs to another project"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn unknown_consumer(id: &str) -> ApiError {
    ApiError::bad_request(
        ErrorCode::UnknownInstance,
        format!("instance {id:?} is not a consumer of your project in /placement"),
    )
}
