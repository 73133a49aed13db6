//! The lists of `/v1/os-hosts`: the hosts, which reservations hold them,
//! and their extra capabilities' names. Each is a page when asked `limit`
//! or `marker`, else the whole list, streamed ([`crate::whole`]).

use std::collections::HashMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use berth_app::hosts::{AllocationsOf, Host, HostAllocation, HostProperty, PropertiesOf};
use berth_app::{App, Rule};
use berth_core::error::ErrorCode;
use serde_json::{json, Value};
use uuid::Uuid;

use super::bodies;
use super::hosts::{allocation_json, host_json, uuid_param};
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::paging::{Ask, Listing, Page};
use crate::tags;
use crate::whole::Items;
use crate::AppState;

/// The name of the host a marker names: the list goes on after it.
async fn host_marker(app: &App, marker: Option<&str>, code: ErrorCode) -> Result<Option<String>, ApiError> {
    let Some(marker) = marker else { return Ok(None) };
    let not_a_host = || ApiError::bad_request(code, format!("marker {marker:?} is not a host"));
    let id = Uuid::parse_str(marker).map_err(|_| not_a_host())?;
    app.hosts().name_of(id).await?.ok_or_else(not_a_host).map(Some)
}

#[utoipa::path(
    get,
    path = "/v1/os-hosts",
    tag = tags::HOSTS,
    summary = "List reservable hosts",
    params(
        crate::paging::Page,
    ),
    responses(
        (status = 200, description = "The hosts by name: all of them, or a page when `limit` or `marker` is given", body = bodies::Hosts),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context, listing: Listing) -> Result<Response, ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsList)?;
    let ask = listing.ask()?;
    let hidden = app.hosts().hidden(&caller).await?;
    match ask {
        Ask::Page(page) => {
            let after = host_marker(&app, page.marker.as_deref(), ErrorCode::HostInvalid).await?;
            let hosts = app.hosts().page(may, after.as_deref(), page.sql_limit()).await?;
            let shown = hosts.iter().map(|h| host_json(h, &hidden)).collect();
            Ok(Json(page.answer("hosts", "/v1/os-hosts", &listing.query, shown, "id")).into_response())
        }
        Ask::Whole(whole) => {
            let limit = whole.sql_limit();
            let first = app.hosts().page(may, None, limit).await?;
            let items = Items { render: Box::new(move |h: &Host| host_json(h, &hidden)), key: |h| h.name.clone() };
            Ok(whole.answer("hosts", first, items, move |after: String| {
                let app = app.clone();
                async move { app.hosts().page(may, Some(&after), limit).await }
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
        crate::paging::Page,
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsGetAllocations)?;
    let ask = listing.ask()?;
    let of = app.hosts().allocations_of(&caller, may, (uuid_param(q, "lease_id")?, uuid_param(q, "reservation_id")?));
    match ask {
        Ask::Page(page) => {
            let after = host_marker(&app, page.marker.as_deref(), ErrorCode::BadMarker).await?;
            let all = app.hosts().allocations_page(&of, after.as_deref(), page.sql_limit()).await?;
            let shown = all.iter().map(allocation_json).collect();
            Ok(Json(page.answer("allocations", "/v1/os-hosts/allocations", q, shown, "resource_id")).into_response())
        }
        Ask::Whole(whole) => {
            let limit = whole.sql_limit();
            let first = app.hosts().allocations_page(&of, None, limit).await?;
            let items = Items { render: Box::new(allocation_json), key: |a: &HostAllocation| a.name.clone() };
            Ok(whole.answer("allocations", first, items, move |after: String| {
                let (app, of): (App, AllocationsOf) = (app.clone(), of.clone());
                async move { app.hosts().allocations_page(&of, Some(&after), limit).await }
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
        crate::paging::Page,
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsGetProperties)?;
    let ask = listing.ask()?;
    let of = app.hosts().properties_of(&caller, may, truthy(q, "all"), truthy(q, "detail"));
    match ask {
        Ask::Page(page) => properties_page(&app, of, page, q).await,
        Ask::Whole(whole) => {
            let limit = whole.sql_limit();
            let first = app.hosts().properties_page(of, None, limit).await?;
            let render = Box::new(move |p: &HostProperty| property_json(p, of.detail));
            let items = Items { render, key: |p: &HostProperty| p.name.clone() };
            Ok(whole.answer("resource_properties", first, items, move |after: String| {
                let app = app.clone();
                async move { app.hosts().properties_page(of, Some(&after), limit).await }
            }))
        }
    }
}

/// One page of the capabilities, after the one its marker names.
async fn properties_page(
    app: &App,
    of: PropertiesOf,
    page: Page,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    if let Some(m) = &page.marker {
        if !app.hosts().property_listed(of, m).await? {
            let names_nothing = format!("marker {m:?} names nothing in this list");
            return Err(ApiError::bad_request(ErrorCode::BadMarker, names_nothing));
        }
    }
    let props = app.hosts().properties_page(of, page.marker.as_deref(), page.sql_limit()).await?;
    let shown = props.iter().map(|p| property_json(p, of.detail)).collect();
    let answer = page.answer("resource_properties", "/v1/os-hosts/properties", q, shown, "property");
    Ok(Json(answer).into_response())
}
