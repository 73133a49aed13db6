//! `/resource_providers` and `/resource_providers/{uuid}`.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::providers::{NewProvider, ProviderFilter, ProviderUpdate};
use berth_app::placement::{Provider, Rule};
use berth_core::error::{ErrorCode, ErrorKind};
use serde_json::{json, Value};
use uuid::Uuid;

use super::http::{bad_request, body, domain, not_found, path_uuid, served_now, with_location, Pl, Query};
use super::microversion::Version;
use super::{bodies, params, schemas};
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

/// A provider as Placement shows it at `mv`.
pub fn provider_json(mv: Version, p: &Provider) -> Value {
    let url = format!("/resource_providers/{}", p.uuid);
    let mut rels = vec!["inventories", "usages"];
    if mv.aggregates() {
        rels.push("aggregates");
    }
    if mv.traits() {
        rels.push("traits");
    }
    if mv.allocations_link() {
        rels.push("allocations");
    }
    let mut links = vec![json!({"rel": "self", "href": url})];
    links.extend(rels.iter().map(|rel| json!({"rel": rel, "href": format!("{url}/{rel}")})));
    let mut out = json!({"uuid": p.uuid, "name": p.name, "generation": p.generation, "links": links});
    if mv.nested_providers() {
        out["parent_provider_uuid"] = json!(p.parent_uuid);
        out["root_provider_uuid"] = json!(p.root_uuid);
    }
    out
}

/// The UUID of a provider named in a path; a 404 in Placement's words otherwise.
pub fn provider_uuid(raw: &str) -> Result<Uuid, ApiError> {
    path_uuid(raw, || not_found(format!("No resource provider with uuid {raw} found")))
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers",
    tag = tags::PLACEMENT,
    summary = "List providers (name, uuid, member_of, in_tree, resources, required)",
    params(
        ("name" = Option<String>, Query, description = "Exactly this name"),
        ("uuid" = Option<String>, Query, description = "Exactly this uuid"),
        ("member_of" = Option<String>, Query, description = "In one of these aggregates: `in:A,B`, `!A` (1.3 on)"),
        ("in_tree" = Option<String>, Query, description = "In the tree of this provider (1.14 on)"),
        ("resources" = Option<String>, Query, description = "With capacity for `CLASS:N,...` (1.4 on)"),
        ("required" = Option<String>, Query, description = "With these traits, `!T` without (1.18 on)"),
    ),
    responses(
        (status = 200, description = "The providers", body = bodies::Providers),
    ),
)]
pub async fn list(p: Pl, State(s): State<AppState>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ProvidersList)?;
    let filter = filter(&p, raw.as_deref())?;
    let found = app.placement().providers().list(&may, &filter).await.map_err(|e| match e {
        berth_app::Error::Domain(e) => match e.code {
            ErrorCode::ResourceClassNotFound => domain(e, "Invalid resource class in resources parameter: "),
            ErrorCode::TraitNotFound => domain(e, "Invalid trait(s) in \"required\" parameter: "),
            _ => ApiError::from(e),
        },
        e => e.into(),
    })?;
    let modified = found.iter().map(|p| p.updated_at).max().or_else(served_now);
    let body = json!({"resource_providers": found.iter().map(|x| provider_json(p.mv, x)).collect::<Vec<_>>()});
    Ok(p.json(StatusCode::OK, &body, modified))
}

/// The providers a list's query string selects.
fn filter(p: &Pl, raw: Option<&str>) -> Result<ProviderFilter, ApiError> {
    let q = Query::parse(raw);
    q.validate(&schemas::list_providers(p.mv))?;
    let mut f = ProviderFilter {
        name: q.get("name").map(str::to_string),
        uuid: q.get("uuid").and_then(|u| Uuid::try_parse(u).ok()),
        in_tree: q.get("in_tree").map(params::in_tree).transpose()?,
        ..Default::default()
    };
    if q.has("member_of") {
        let m = params::member_of(&q, "member_of", p.mv)?;
        f.member_of = m.any_of;
        f.forbidden_aggregates = m.forbidden;
    }
    if let Some(r) = q.get("resources") {
        f.resources = params::resources(r)?;
    }
    if let Some(t) = params::required(&q, "required", p.mv)? {
        f.required_traits = t.required;
        f.forbidden_traits = t.forbidden;
    }
    Ok(f)
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}",
    tag = tags::PLACEMENT,
    summary = "Show a provider",
    responses(
        (status = 200, description = "The provider", body = bodies::Provider),
    ),
)]
pub async fn show(p: Pl, State(s): State<AppState>, Path(uuid): Path<String>) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ProvidersShow)?;
    let rp = app.placement().providers().show(&may, provider_uuid(&uuid)?).await?;
    Ok(p.json(StatusCode::OK, &provider_json(p.mv, &rp), Some(rp.updated_at)))
}

#[utoipa::path(
    post,
    path = "/placement/resource_providers",
    tag = tags::PLACEMENT,
    summary = "Create a provider",
    request_body = bodies::NewProvider,
    responses(
        (status = 200, description = "Created (1.20 on)", body = bodies::Provider),
        (status = 201, description = "Created (before 1.20)"),
    ),
)]
pub async fn create(p: Pl, State(s): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::ProvidersCreate)?;
    let asked: bodies::NewProvider = body(&bytes, &schemas::create_provider(p.mv))?;
    let name = asked.name;
    let uuid = match asked.uuid.as_deref() {
        Some(u) => Uuid::try_parse(u).map_err(|e| bad_request(e.to_string()))?,
        None => Uuid::new_v4(),
    };
    let parent = asked.parent_provider_uuid.as_deref().and_then(|u| Uuid::try_parse(u).ok());
    let new = NewProvider { uuid: Some(uuid), name: name.clone(), parent };
    let unable = format!("Unable to create resource provider \"{name}\", {uuid}: ");
    app.placement().providers().create(&may, new).await.map_err(|e| invalid_with(e, &unable))?;
    let location = p.location(&format!("/resource_providers/{uuid}"));
    if !p.mv.create_provider_returns_body() {
        return Ok(with_location(p.empty(StatusCode::CREATED, None), &location));
    }
    let rp = app.placement().provider(&may, uuid).await?;
    Ok(with_location(p.json(StatusCode::OK, &provider_json(p.mv, &rp), Some(rp.updated_at)), &location))
}

/// A write's refusals, an invalid one prefixed by `prefix`.
fn invalid_with(e: berth_app::Error, prefix: &str) -> ApiError {
    match e {
        berth_app::Error::Domain(e) if e.kind == ErrorKind::Invalid => domain(e, prefix),
        e => e.into(),
    }
}

#[utoipa::path(
    put,
    path = "/placement/resource_providers/{uuid}",
    tag = tags::PLACEMENT,
    summary = "Rename or re-parent a provider",
    request_body = bodies::ProviderChange,
    responses(
        (status = 200, description = "The provider", body = bodies::Provider),
    ),
)]
pub async fn update(
    p: Pl,
    State(s): State<AppState>,
    Path(raw): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::ProvidersUpdate)?;
    let uuid = app.placement().provider(&may, provider_uuid(&raw)?).await?.uuid;
    let asked: bodies::ProviderChange = body(&bytes, &schemas::update_provider(p.mv))?;
    let parent = asked
        .parent_provider_uuid
        .map(|v| v.as_deref().map(Uuid::try_parse).transpose().map_err(|e| bad_request(e.to_string())))
        .transpose()?;
    let update = ProviderUpdate { name: asked.name, parent, allow_reparent: p.mv.reparenting() };
    let unable = format!("Unable to save resource provider {uuid}: ");
    let rp = app.placement().providers().update(&may, uuid, update).await.map_err(|e| invalid_with(e, &unable))?;
    Ok(p.json(StatusCode::OK, &provider_json(p.mv, &rp), Some(rp.updated_at)))
}

#[utoipa::path(
    delete,
    path = "/placement/resource_providers/{uuid}",
    tag = tags::PLACEMENT,
    summary = "Delete a provider",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    let (app, may) = p.may(&s, Rule::ProvidersDelete)?;
    let gone = || not_found(format!("No resource provider with uuid {raw} found for delete"));
    let uuid = path_uuid(&raw, gone)?;
    app.placement().providers().delete(&may, uuid).await.map_err(|e| match e {
        berth_app::Error::Domain(e) if e.kind == ErrorKind::NotFound => gone(),
        e => e.into(),
    })?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}
