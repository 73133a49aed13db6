//! Sharing a lease (`PUT /v1/leases/{id}/shared_with`) and the leases
//! shared with the caller's project (`GET /v1/leases/shared`), each shown
//! with only what a project it is shared with needs: no owner, no name, no
//! events, no hosts' names.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use berth_app::leases::Lease;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use berth_core::lease::reservation_class;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::super::path_id;
use super::super::read::{self, dotted, At, Body};
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::paging::Listing;
use crate::tags;
use crate::AppState;

/// The projects a lease is shared with: the whole list, replacing what it
/// was (empty: shared with none). At most 100 project ids, each 1 to 64 of
/// `A-Z a-z 0-9 _ -`, none twice, not the lease's own project.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::blazar) struct ShareBody {
    projects: Vec<String>,
}

impl Body for ShareBody {
    const WRAPPERS: &'static [&'static str] = &[];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        let what = match at {
            [At::Key("projects")] if given.is_none() => "projects is required".to_string(),
            [At::Key("projects")] => "projects must be a list of project ids".to_string(),
            _ => format!("{} must be a project id", dotted(at)),
        };
        ApiError::bad_request(ErrorCode::ShareInvalid, what)
    }
}

/// A lease's sharing, as the route answers it.
#[derive(Serialize, ToSchema)]
pub(in crate::blazar) struct Sharing {
    lease_id: Uuid,
    shared_with: Vec<String>,
}

#[utoipa::path(
    put,
    path = "/v1/leases/{id}/shared_with",
    tag = tags::LEASES,
    summary = "Share a lease with other projects: they may draw from its reservations (the whole list, replaced)",
    request_body = ShareBody,
    responses(
        (status = 200, description = "The lease's sharing", body = Sharing),
        (status = 400, description = "A bad list (berth.share.invalid) or an unknown key (berth.unknown_key)"),
        (status = 409, description = "The lease has ended (berth.share.lease_over)"),
    ),
)]
pub(in crate::blazar) async fn share(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Sharing>, ApiError> {
    let id = path_id(&id, "lease", ErrorCode::LeaseNotFound)?;
    let asked: ShareBody = read::typed(&object(&body)?)?;
    let shared_with = app(&state).leases().share(&caller(&state, &ctx), id, &asked.projects).await?;
    Ok(Json(Sharing { lease_id: id, shared_with }))
}

/// The body as a JSON object, refused in sharing's words.
fn object(body: &Bytes) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        _ => {
            Err(ApiError::bad_request(ErrorCode::ShareInvalid, "the body must be a JSON object: {\"projects\": [...]}"))
        }
    }
}

/// The leases shared with the caller's project.
#[derive(Serialize, ToSchema)]
pub(in crate::blazar) struct SharedLeases {
    leases: Vec<Value>,
}

#[utoipa::path(
    get,
    path = "/v1/leases/shared",
    tag = tags::LEASES,
    summary = "The leases shared with the caller's project, each with only what drawing from it needs",
    params(crate::paging::Page),
    responses(
        (status = 200, description = "A page of the leases shared with you, in creation order", body = SharedLeases),
    ),
)]
pub(in crate::blazar) async fn shared(
    State(state): State<AppState>,
    ctx: Context,
    listing: Listing,
) -> Result<Json<Value>, ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    app.leases().may_list_shared(&caller)?;
    let page = listing.page()?;
    let after = match &page.marker {
        Some(m) => Some(app.leases().shared_marker(&caller, marker(m)?).await?),
        None => None,
    };
    let shown = app.leases().shared(&caller, after, page.sql_limit()).await?.iter().map(shared_json).collect();
    Ok(Json(page.answer("leases", "/v1/leases/shared", &listing.query, shown, "id")))
}

fn marker(m: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(m)
        .map_err(|_| ApiError::bad_request(ErrorCode::BadMarker, format!("marker {m:?} is not a lease id")))
}

/// A lease as a project it is shared with sees it.
fn shared_json(l: &Lease) -> Value {
    let r = &l.record;
    let reservations: Vec<Value> = r
        .reservations
        .iter()
        .map(|res| {
            let mut o = json!({"id": res.id, "resource_type": res.resource_type, "status": res.status.as_str()});
            if res.resource_type == "physical:host" {
                o["host_count"] = json!(res.slots.len());
            } else {
                // What an instance asks Placement for to draw from it.
                o["resource_class"] = json!(reservation_class(res.id));
                o["amount"] = json!(res.slots.len());
                o["resources"] = json!(res.slots.first().map(|s| &s.resources));
                if let Some(flavor) = res.params.get("flavor_id") {
                    o["flavor_id"] = flavor.clone();
                }
            }
            o
        })
        .collect();
    json!({
        "id": r.id,
        "start_date": format_date(r.start),
        "end_date": format_date(r.end),
        "status": r.status.as_str(),
        "shared": true,
        "reservations": reservations,
    })
}
