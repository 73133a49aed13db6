//! `/v1/os-hosts`: enrol providers as reservable hosts, their extra
//! capabilities and properties, and which reservations hold them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use berth_store::commands::{HostChange, Keyed, NewHost, HOST_FIELDS};
use berth_store::queries::hosts::{AllocationFilter, Host, HostAllocation};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::bodies;
use super::read::{self, Body as _};
use super::{idempotency, meta, path_id};
use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// The host as Blazar shows it, without the capabilities in `hidden`.
pub(super) fn host_json(h: &Host, hidden: &BTreeSet<String>) -> Value {
    let mut o = Map::new();
    for (k, v) in h.capabilities.iter().filter(|(k, _)| !hidden.contains(*k)) {
        o.insert(k.clone(), v.clone());
    }
    let fixed = json!({
        "id": h.id,
        "hypervisor_hostname": h.name,
        "service_name": h.name,
        "vcpus": h.vcpus,
        "memory_mb": h.memory_mb,
        "local_gb": h.local_gb,
        "reservable": h.reservable,
        "disabled": h.disabled.is_some(),
        "disabled_reason": h.disabled,
        "trust_id": null,
        "created_at": format_date(h.created_at),
        "updated_at": format_date(h.updated_at),
    });
    for (k, v) in fixed.as_object().expect("object") {
        o.insert(k.clone(), v.clone());
    }
    Value::Object(o)
}

pub(super) fn allocation_json(a: &HostAllocation) -> Value {
    json!({
        "resource_id": a.host,
        "reservations": a.reservations.iter().map(|(r, l)| json!({"id": r, "lease_id": l})).collect::<Vec<_>>(),
    })
}

pub(super) fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::HostInvalid, m)
}

fn host_id(id: &str) -> Result<Uuid, ApiError> {
    path_id(id, "host", ErrorCode::HostNotFound)
}

/// The capabilities `ctx` may not see: the private ones, unless its rules
/// let it (admins, as Blazar hides them from everyone else).
pub(super) async fn hidden_from(state: &AppState, ctx: &Context) -> Result<BTreeSet<String>, ApiError> {
    if state.rules.allows(ctx, Action::HostsGetPrivateProperties, &Target::own(ctx)) {
        return Ok(BTreeSet::new());
    }
    Ok(state.store.private_host_properties().await?)
}

#[utoipa::path(
    get,
    path = "/v1/os-hosts/{id}",
    tag = tags::HOSTS,
    summary = "Show a host and its extra capabilities",
    responses(
        (status = 200, description = "The host", body = bodies::OneHost),
    ),
)]
pub(super) async fn show(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.rules.authorize(&ctx, Action::HostsGet, &Target::own(&ctx))?;
    let hidden = hidden_from(&state, &ctx).await?;
    let host = state.store.host(host_id(&id)?).await?;
    Ok(Json(json!({ "host": host_json(&host, &hidden) })))
}

#[utoipa::path(
    post,
    path = "/v1/os-hosts",
    tag = tags::HOSTS,
    summary = "Enrol a host (an existing provider, or a new one with its sizes)",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Up to 255 printable ASCII characters: the same \
          key with the same body within 24 h answers the host first enrolled (with `Idempotent-Replayed: true`); \
          with another request it is a 409"),
    ),
    request_body = bodies::NewHost,
    responses(
        (status = 201, description = "The host", body = bodies::OneHost),
    ),
)]
pub(super) async fn create(
    State(state): State<AppState>,
    ctx: Context,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    state.rules.authorize(&ctx, Action::HostsCreate, &Target::own(&ctx))?;
    let obj = read::object(&body, bodies::NewHost::WRAPPERS)?;
    let key = idempotency::request_key(&headers, &ctx, "POST /v1/os-hosts", &obj)?;
    let asked: bodies::NewHost = read::typed(&obj)?;
    let resources = match (asked.vcpus, asked.memory_mb, asked.local_gb) {
        (Some(v), Some(m), Some(d)) => Some((v.0, m.0, d.0)),
        (None, None, None) => None,
        _ => return Err(bad("give all of vcpus, memory_mb and local_gb, or none")),
    };
    let capabilities: BTreeMap<String, Value> =
        asked.capabilities.into_iter().filter(|(k, _)| !HOST_FIELDS.contains(&k.as_str())).collect();
    let reservable = asked.reservable.is_none_or(|f| f.0);
    let new = NewHost { name: asked.name, resources, reservable, capabilities };
    let (id, replayed) = match key {
        None => (state.store.enrol_host(&meta(&ctx), new).await?, false),
        Some(key) => match state.store.enrol_host_keyed(&meta(&ctx), new, &key).await? {
            Keyed::Made(id) => (id, false),
            Keyed::Earlier(id) => (id, true),
        },
    };
    let host = state.store.host(id).await?;
    Ok(idempotency::created(json!({ "host": host_json(&host, &BTreeSet::new()) }), replayed))
}

#[utoipa::path(
    put,
    path = "/v1/os-hosts/{id}",
    tag = tags::HOSTS,
    summary = "Update a host's extra capabilities; disable it (its reservations heal) or enable it",
    request_body = bodies::HostChange,
    responses(
        (status = 200, description = "The host", body = bodies::ChangedHost),
    ),
)]
pub(super) async fn update(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    state.rules.authorize(&ctx, Action::HostsUpdate, &Target::own(&ctx))?;
    let id = host_id(&id)?;
    let asked: bodies::HostChange = read::read(&body)?;
    let mut change = HostChange { reservable: asked.reservable.map(|f| f.0), capabilities: BTreeMap::new() };
    let disabled = asked.disabled.map(|f| f.0);
    for (k, v) in asked.capabilities {
        if HOST_FIELDS.contains(&k.as_str()) {
            return Err(bad(format!("{k} cannot be changed here")));
        }
        change.capabilities.insert(k, v);
    }
    if change.reservable.is_none() && change.capabilities.is_empty() && disabled.is_none() {
        return Err(bad("nothing to update"));
    }
    if change.reservable.is_some() || !change.capabilities.is_empty() {
        state.store.update_host(&meta(&ctx), id, change).await?;
    }
    let mut healed = Vec::new();
    if let Some(disabled) = disabled {
        // Disabling (or enabling) heals in the same transaction.
        let demands = crate::heal::demands(&state, &[id]).await?;
        let reason = Some("admin".to_string());
        healed = state.store.set_host_disabled(&meta(&ctx), id, disabled, reason, &demands).await?;
    }
    let host = state.store.host(id).await?;
    let healed: Vec<Value> = healed.iter().map(crate::heal::outcome_json).collect();
    Ok(Json(json!({ "host": host_json(&host, &BTreeSet::new()), "healed": healed })))
}

#[utoipa::path(
    delete,
    path = "/v1/os-hosts/{id}",
    tag = tags::HOSTS,
    summary = "Remove a host no current or future lease holds",
    responses(
        (status = 204, description = "Removed"),
    ),
)]
pub(super) async fn delete(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.rules.authorize(&ctx, Action::HostsDelete, &Target::own(&ctx))?;
    state.store.remove_host(&meta(&ctx), host_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) fn uuid_param(q: &HashMap<String, String>, key: &str) -> Result<Option<Uuid>, ApiError> {
    match q.get(key) {
        Some(v) => Uuid::parse_str(v).map(Some).map_err(|_| bad(format!("{key} {v:?} is not an id"))),
        None => Ok(None),
    }
}

/// Whose reservations `ctx` sees in host allocations (`None`: everyone's).
pub(super) fn project_scope<'c>(state: &AppState, ctx: &'c Context) -> Option<&'c str> {
    state.rules.visible_project(ctx, Action::LeasesGetAllProjects)
}

#[utoipa::path(
    get,
    path = "/v1/os-hosts/{id}/allocation",
    tag = tags::HOSTS,
    summary = "Which leases hold one host",
    params(
        ("lease_id" = Option<String>, Query, description = "Only this lease's reservations"),
        ("reservation_id" = Option<String>, Query, description = "Only this reservation"),
    ),
    responses(
        (status = 200, description = "The host with its reservations", body = bodies::OneHostAllocation),
    ),
)]
pub(super) async fn allocation(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    state.rules.authorize(&ctx, Action::HostsGetAllocations, &Target::own(&ctx))?;
    let (lease, reservation) = (uuid_param(&q, "lease_id")?, uuid_param(&q, "reservation_id")?);
    let scope = project_scope(&state, &ctx);
    let one =
        state.store.host_allocation(host_id(&id)?, AllocationFilter { lease, reservation, project: scope }).await?;
    Ok(Json(json!({ "allocation": allocation_json(&one) })))
}

#[utoipa::path(
    patch,
    path = "/v1/os-hosts/properties/{name}",
    tag = tags::HOSTS,
    summary = "Make a capability private or public",
    request_body = bodies::PropertyChange,
    responses(
        (status = 200, description = "The capability", body = bodies::OneProperty),
    ),
)]
pub(super) async fn set_property(
    State(state): State<AppState>,
    ctx: Context,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    state.rules.authorize(&ctx, Action::HostsUpdateProperty, &Target::own(&ctx))?;
    let private = read::read::<bodies::PropertyChange>(&body)?.private;
    state.store.set_host_property(&meta(&ctx), &name, private).await?;
    let found = state.store.host_properties(true).await?.into_iter().find(|p| p.name == name);
    let values = found.map(|p| p.values).unwrap_or_default();
    Ok(Json(json!({
        "resource_property": {"property": name, "private": private, "values": values, "resource_type": "physical:host"}
    })))
}
