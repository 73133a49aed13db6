//! The lists of `/v1/os-hosts`: the hosts, which reservations hold them,
//! and their extra capabilities' names. Each is a page when asked `limit`
//! or `marker`, else the whole list, streamed ([`crate::whole`]).

use std::collections::HashMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_core::error::ErrorCode;
use berth_store::queries::hosts::{AllocationFilter, Host, HostAllocation, HostProperty};
use serde_json::{json, Value};
use uuid::Uuid;

use super::bodies;
use super::hosts::{allocation_json, host_json, uuid_param};
use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::paging::{Ask, Listing};
use crate::tags;
use crate::whole::Items;
use crate::AppState;

/// The name of the host a marker names: the list goes on after it.
async fn host_marker(state: &AppState, marker: &str, code: ErrorCode) -> Result<String, ApiError> {
    let not_a_host = || ApiError::bad_request(code, format!("marker {marker:?} is not a host"));
    let id = Uuid::parse_str(marker).map_err(|_| not_a_host())?;
    state.store.host_name(id).await?.ok_or_else(not_a_host)
}

#[utoipa::path(
    get,
    path = "/v1/os-hosts",
    tag = tags::HOSTS,
    summary = "List reservable hosts",
    params(
        crate::paging::PageParams,
    ),
    responses(
        (status = 200, description = "The hosts by name: all of them, or a page when `limit` or `marker` is given", body = bodies::Hosts),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context, listing: Listing) -> Result<Response, ApiError> {
    state.rules.authorize(&ctx, Action::HostsList, &Target::own(&ctx))?;
    let ask = listing.ask()?;
    let hidden = crate::gate::app(&state).hosts().hidden(&crate::gate::caller(&state, &ctx)).await?;
    match ask {
        Ask::Page(page) => {
            let after = match &page.marker {
                Some(m) => Some(host_marker(&state, m, ErrorCode::HostInvalid).await?),
                None => None,
            };
            let hosts = state.store.hosts(after.as_deref(), page.sql_limit()).await?;
            let shown = hosts.iter().map(|h| host_json(h, &hidden)).collect();
            Ok(Json(page.answer("hosts", "/v1/os-hosts", &listing.query, shown, "id")).into_response())
        }
        Ask::Whole(whole) => {
            let limit = whole.sql_limit();
            let first = state.store.hosts(None, limit).await?;
            let items = Items { render: Box::new(move |h: &Host| host_json(h, &hidden)), key: |h| h.name.clone() };
            let store = state.store.clone();
            Ok(whole.answer("hosts", first, items, move |after: String| {
                let store = store.clone();
                async move { store.hosts(Some(&after), limit).await }
            }))
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/os-hosts/allocations",
    tag = tags::HOSTS,
    summary = "Which leases hold which hosts",
    params(
        ("lease_id" = Option<String>, Query, description = "Only this lease's reservations"),
        ("reservation_id" = Option<String>, Query, description = "Only this reservation"),
        crate::paging::PageParams,
    ),
    responses(
        (status = 200, description = "The hosts by name with their reservations: all of them, or a page when `limit` or `marker` is given", body = bodies::HostAllocations),
    ),
)]
pub(super) async fn allocations(
    State(state): State<AppState>,
    ctx: Context,
    listing: Listing,
) -> Result<Response, ApiError> {
    let q = &listing.query;
    state.rules.authorize(&ctx, Action::HostsGetAllocations, &Target::own(&ctx))?;
    let ask = listing.ask()?;
    let (lease, reservation) = (uuid_param(q, "lease_id")?, uuid_param(q, "reservation_id")?);
    let filter = AllocationFilter {
        lease,
        reservation,
        project: state.rules.visible_project(&ctx, Action::LeasesGetAllProjects),
    };
    match ask {
        Ask::Page(page) => {
            let after = match &page.marker {
                Some(m) => Some(host_marker(&state, m, ErrorCode::BadMarker).await?),
                None => None,
            };
            let all = state.store.host_allocations(after.as_deref(), page.sql_limit(), filter).await?;
            let shown = all.iter().map(allocation_json).collect();
            Ok(Json(page.answer("allocations", "/v1/os-hosts/allocations", q, shown, "resource_id")).into_response())
        }
        Ask::Whole(whole) => {
            let limit = whole.sql_limit();
            let first = state.store.host_allocations(None, limit, filter).await?;
            let items = Items { render: Box::new(allocation_json), key: |a: &HostAllocation| a.name.clone() };
            let (store, project) = (state.store.clone(), filter.project.map(str::to_string));
            Ok(whole.answer("allocations", first, items, move |after: String| {
                let (store, project) = (store.clone(), project.clone());
                async move {
                    let filter = AllocationFilter { lease, reservation, project: project.as_deref() };
                    store.host_allocations(Some(&after), limit, filter).await
                }
            }))
        }
    }
}

fn truthy(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

fn property_json(p: &HostProperty, detail: bool) -> Value {
    if detail {
        json!({"property": p.name, "private": p.private, "values": p.values})
    } else {
        json!({"property": p.name})
    }
}

#[utoipa::path(
    get,
    path = "/v1/os-hosts/properties",
    tag = tags::HOSTS,
    summary = "The extra capabilities hosts have",
    params(
        ("detail" = Option<String>, Query, description = "`true`: with whether each is private and its values"),
        ("all" = Option<String>, Query, description = "`true`: private ones too (admins)"),
        crate::paging::PageParams,
    ),
    responses(
        (status = 200, description = "The capabilities by name: all of them, or a page when `limit` or `marker` is given", body = bodies::Properties),
    ),
)]
pub(super) async fn properties(
    State(state): State<AppState>,
    ctx: Context,
    listing: Listing,
) -> Result<Response, ApiError> {
    let q = &listing.query;
    state.rules.authorize(&ctx, Action::HostsGetProperties, &Target::own(&ctx))?;
    let ask = listing.ask()?;
    let detail = truthy(q, "detail");
    let all = truthy(q, "all") && state.rules.allows(&ctx, Action::HostsGetPrivateProperties, &Target::own(&ctx));
    let store = state.store.clone();
    let read = move |after: Option<String>, limit: i64| {
        let store = store.clone();
        async move { store.host_properties_after(after.as_deref(), limit, all, detail).await }
    };
    match ask {
        Ask::Page(page) => {
            if let Some(m) = &page.marker {
                if !state.store.host_property_listed(m, all).await? {
                    let names_nothing = format!("marker {m:?} names nothing in this list");
                    return Err(ApiError::bad_request(ErrorCode::BadMarker, names_nothing));
                }
            }
            let props = read(page.marker.clone(), page.sql_limit()).await?;
            let shown = props.iter().map(|p| property_json(p, detail)).collect();
            let answer = page.answer("resource_properties", "/v1/os-hosts/properties", q, shown, "property");
            Ok(Json(answer).into_response())
        }
        Ask::Whole(whole) => {
            let limit = whole.sql_limit();
            let first = read(None, limit).await?;
            let items =
                Items { render: Box::new(move |p: &HostProperty| property_json(p, detail)), key: |p| p.name.clone() };
            Ok(whole.answer("resource_properties", first, items, move |after: String| read(Some(after), limit)))
        }
    }
}
