//! `/traits` and `/resource_providers/{uuid}/traits` (1.6 on).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::traits::TraitFilter;
use berth_app::placement::Rule;
use berth_core::error::ErrorCode;
use serde_json::json;

use super::bodies;
use super::http::{bad_request, body, conflict, not_found, served_now, with_location, Pl, Query};
use super::providers::provider_uuid;
use super::{schema, schemas};
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

#[utoipa::path(
    get,
    path = "/placement/traits",
    tag = tags::PLACEMENT,
    summary = "List traits (name, associated)",
    params(
        ("name" = Option<String>, Query, description = "`in:A,B` or `startswith:PREFIX`"),
        ("associated" = Option<String>, Query, description = "`true`: only traits some provider has; `false`: only those none has"),
    ),
    responses(
        (status = 200, description = "Trait names", body = bodies::Traits),
    ),
)]
pub async fn list(p: Pl, State(s): State<AppState>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::TraitsList)?;
    let filter = filter(raw.as_deref())?;
    let traits = app.placement().traits().list(&may, &filter).await?;
    Ok(p.json(StatusCode::OK, &json!({"traits": traits}), served_now()))
}

/// The traits a list's query string selects.
fn filter(raw: Option<&str>) -> Result<TraitFilter, ApiError> {
    let q = Query::parse(raw);
    q.validate(&schemas::list_traits())?;
    let mut f = TraitFilter::default();
    if let Some(name) = q.get("name") {
        match name.split_once(':') {
            Some(("in", list)) => f.name_in = Some(list.split(',').map(str::to_string).collect()),
            Some(("startswith", prefix)) => f.prefix = Some(prefix.to_string()),
            Some(_) => {}
            None => {
                return Err(bad_request(format!(
                    "Badly formatted name parameter. Expected name query string parameter in form: \
                     ?name=[in|startswith]:[name1,name2|prefix]. Got: \"{name}\""
                )))
            }
        }
    }
    if let Some(a) = q.get("associated") {
        f.associated = match a.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => return Err(bad_request("The query parameter \"associated\" only accepts \"true\" or \"false\"")),
        };
    }
    Ok(f)
}

#[utoipa::path(
    get,
    path = "/placement/traits/{name}",
    tag = tags::PLACEMENT,
    summary = "Whether a trait exists",
    responses(
        (status = 204, description = "It exists"),
    ),
)]
pub async fn show(p: Pl, State(s): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    let (app, may) = p.may(&s, Rule::TraitsShow)?;
    if !app.placement().traits().exists(&may, &name).await? {
        return Err(not_found(format!("No such trait(s): {name}.")));
    }
    Ok(p.empty(StatusCode::NO_CONTENT, served_now()))
}

#[utoipa::path(
    put,
    path = "/placement/traits/{name}",
    tag = tags::PLACEMENT,
    summary = "Create a custom trait",
    responses(
        (status = 201, description = "Created"),
        (status = 204, description = "It existed"),
    ),
)]
pub async fn create(p: Pl, State(s): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    let (app, may) = p.may(&s, Rule::TraitsUpdate)?;
    if schema::validate(&json!(name), &schemas::custom_trait()).is_err() {
        return Err(bad_request(
            "The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix \
             \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\"",
        ));
    }
    let created = app.placement().traits().ensure(&may, &name).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::NO_CONTENT };
    let resp = p.empty(status, served_now());
    Ok(with_location(resp, &p.location(&format!("/traits/{name}"))))
}

#[utoipa::path(
    delete,
    path = "/placement/traits/{name}",
    tag = tags::PLACEMENT,
    summary = "Delete a custom trait",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete(p: Pl, State(s): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    let (app, may) = p.may(&s, Rule::TraitsDelete)?;
    app.placement().traits().delete(&may, &name).await?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}/traits",
    tag = tags::PLACEMENT,
    summary = "A provider's traits",
    responses(
        (status = 200, description = "Its traits", body = bodies::ProviderTraits),
    ),
)]
pub async fn of_provider(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ProviderTraitsList)?;
    let uuid = provider_uuid(&raw)?;
    let (rp, traits) = app.placement().traits().of_provider(&may, uuid).await?;
    let body = json!({"resource_provider_generation": rp.generation, "traits": traits});
    Ok(p.json(StatusCode::OK, &body, Some(rp.updated_at)))
}

fn generation_conflict() -> ApiError {
    conflict(
        ErrorCode::ConcurrentUpdate,
        "Resource provider's generation already changed. Please update the generation and try again.",
    )
}

#[utoipa::path(
    put,
    path = "/placement/resource_providers/{uuid}/traits",
    tag = tags::PLACEMENT,
    summary = "Replace a provider's traits",
    request_body = bodies::ProviderTraits,
    responses(
        (status = 200, description = "Its traits", body = bodies::ProviderTraits),
    ),
)]
pub async fn replace(
    p: Pl,
    State(s): State<AppState>,
    Path(raw): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::ProviderTraitsUpdate)?;
    let req: bodies::ProviderTraits = body(&bytes, &schemas::provider_traits())?;
    let uuid = provider_uuid(&raw)?;
    let traits: BTreeSet<String> = req.traits.into_iter().collect();
    let replaced = app.placement().traits().replace(&may, uuid, req.resource_provider_generation, traits.clone()).await;
    let generation = replaced.map_err(|e| match e {
        berth_app::Error::Domain(e) if e.code == ErrorCode::ConcurrentUpdate => generation_conflict(),
        e => e.into(),
    })?;
    let answer =
        bodies::ProviderTraits { resource_provider_generation: generation, traits: traits.into_iter().collect() };
    Ok(p.json(StatusCode::OK, &serde_json::to_value(answer).unwrap_or_default(), served_now()))
}

#[utoipa::path(
    delete,
    path = "/placement/resource_providers/{uuid}/traits",
    tag = tags::PLACEMENT,
    summary = "Remove a provider's traits",
    responses(
        (status = 204, description = "Removed"),
    ),
)]
pub async fn clear(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.traits())?;
    let (app, may) = p.may(&s, Rule::ProviderTraitsDelete)?;
    let uuid = provider_uuid(&raw)?;
    app.placement().traits().clear(&may, uuid).await?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}
