//! `/v1/os-hosts`: enrol providers as reservable hosts, their extra
//! capabilities and properties, and which reservations hold them. Each
//! handler reads the request, calls one of `berth_app`'s host operations,
//! and renders its result.

use std::collections::{BTreeSet, HashMap};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use berth_app::hosts::{Change, Enrol, Host, HostAllocation};
use berth_app::Rule;
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::bodies;
use super::read::{self, Body as _};
use super::{idempotency, path_id};
use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsGet)?;
    let (host, hidden) = app.hosts().show(&caller, may, host_id(&id)?).await?;
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsCreate)?;
    let obj = read::object(&body, bodies::NewHost::WRAPPERS)?;
    let key = idempotency::request_key(&headers, &ctx, "POST /v1/os-hosts", &obj)?;
    let asked: bodies::NewHost = read::typed(&obj)?;
    let enrol = Enrol {
        name: asked.name,
        vcpus: asked.vcpus.map(|v| v.0),
        memory_mb: asked.memory_mb.map(|v| v.0),
        local_gb: asked.local_gb.map(|v| v.0),
        reservable: asked.reservable.map(|f| f.0),
        capabilities: asked.capabilities,
        key,
    };
    let (host, replayed) = app.hosts().enrol(&caller, may, enrol).await?;
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsUpdate)?;
    let id = host_id(&id)?;
    let asked: bodies::HostChange = read::read(&body)?;
    let change = Change {
        reservable: asked.reservable.map(|f| f.0),
        disabled: asked.disabled.map(|f| f.0),
        capabilities: asked.capabilities,
    };
    let (host, healed) = app.hosts().change(&caller, may, id, change).await?;
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsDelete)?;
    app.hosts().remove(&caller, may, host_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) fn uuid_param(q: &HashMap<String, String>, key: &str) -> Result<Option<Uuid>, ApiError> {
    match q.get(key) {
        Some(v) => Uuid::parse_str(v).map(Some).map_err(|_| bad(format!("{key} {v:?} is not an id"))),
        None => Ok(None),
    }
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsGetAllocations)?;
    let asked = (uuid_param(&q, "lease_id")?, uuid_param(&q, "reservation_id")?);
    let one = app.hosts().allocation(&caller, may, host_id(&id)?, asked).await?;
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
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = app.hosts().may(&caller, Rule::HostsUpdateProperty)?;
    let private = read::read::<bodies::PropertyChange>(&body)?.private;
    let values = app.hosts().set_property(&caller, may, &name, private).await?;
    Ok(Json(json!({
        "resource_property": {"property": name, "private": private, "values": values, "resource_type": "physical:host"}
    })))
}
