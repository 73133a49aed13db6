//! `/resource_classes` (1.2 on).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::Rule;
use berth_core::error::ErrorKind;
use serde_json::{json, Value};

use super::bodies;
use super::http::{body, domain, not_found, served_now, with_location, Pl};
use super::schema;
use super::schemas;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

fn class_json(name: &str) -> Value {
    json!({"name": name, "links": [{"rel": "self", "href": format!("/resource_classes/{name}")}]})
}

#[utoipa::path(
    get,
    path = "/placement/resource_classes",
    tag = tags::PLACEMENT,
    summary = "List resource classes",
    responses(
        (status = 200, description = "The classes", body = bodies::ResourceClasses),
    ),
)]
pub async fn list(p: Pl, State(s): State<AppState>) -> Result<Response, ApiError> {
    p.since(p.mv.resource_classes())?;
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ClassesList)?;
    let classes = app.placement().classes().list(&may).await?;
    let body = json!({"resource_classes": classes.iter().map(|c| class_json(c)).collect::<Vec<_>>()});
    Ok(p.json(StatusCode::OK, &body, served_now()))
}

#[utoipa::path(
    get,
    path = "/placement/resource_classes/{name}",
    tag = tags::PLACEMENT,
    summary = "Show a resource class",
    responses(
        (status = 200, description = "The class", body = bodies::ResourceClass),
    ),
)]
pub async fn show(p: Pl, State(s): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.resource_classes())?;
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ClassesShow)?;
    if !app.placement().classes().exists(&may, &name).await? {
        return Err(not_found(format!("No such resource class {name}.")));
    }
    Ok(p.json(StatusCode::OK, &class_json(&name), served_now()))
}

#[utoipa::path(
    post,
    path = "/placement/resource_classes",
    tag = tags::PLACEMENT,
    summary = "Create a custom resource class",
    request_body = bodies::ClassName,
    responses(
        (status = 201, description = "Created"),
    ),
)]
pub async fn create(p: Pl, State(s): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    p.since(p.mv.resource_classes())?;
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::ClassesCreate)?;
    let asked: bodies::ClassName = body(&bytes, &schemas::resource_class())?;
    let name = asked.name;
    app.placement().classes().create(&may, &name).await?;
    Ok(with_location(p.empty(StatusCode::CREATED, None), &p.location(&format!("/resource_classes/{name}"))))
}

/// Before 1.7: renames a custom class. From 1.7: creates it, bodiless.
#[utoipa::path(
    put,
    path = "/placement/resource_classes/{name}",
    tag = tags::PLACEMENT,
    summary = "Create (1.7 on; bodiless) or rename (before) a custom resource class",
    request_body(content = Option<bodies::ClassName>, description = "Before 1.7 only: the new name"),
    responses(
        (status = 201, description = "Created"),
        (status = 204, description = "It existed"),
        (status = 200, description = "Renamed (before 1.7)", body = bodies::ResourceClass),
    ),
)]
pub async fn update(
    p: Pl,
    State(s): State<AppState>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    p.since(p.mv.resource_classes())?;
    if p.mv.put_resource_class_creates() {
        let (app, may) = p.may(&s, Rule::ClassesUpdate)?;
        schema::validate(&json!({"name": name}), &schemas::resource_class())
            .map_err(|e| super::http::bad_request(format!("JSON does not validate: {e}")))?;
        let created = app.placement().classes().ensure(&may, &name).await?;
        let status = if created { StatusCode::CREATED } else { StatusCode::NO_CONTENT };
        return Ok(with_location(p.empty(status, None), &p.location(&format!("/resource_classes/{name}"))));
    }
    p.json_content()?;
    let (app, may) = p.may(&s, Rule::ClassesUpdate)?;
    let to = body::<bodies::ClassName>(&bytes, &schemas::resource_class())?.name;
    app.placement().classes().rename(&may, &name, &to).await?;
    Ok(p.json(StatusCode::OK, &class_json(&to), None))
}

#[utoipa::path(
    delete,
    path = "/placement/resource_classes/{name}",
    tag = tags::PLACEMENT,
    summary = "Delete a custom resource class",
    responses(
        (status = 204, description = "Deleted"),
    ),
)]
pub async fn delete(p: Pl, State(s): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
    p.since(p.mv.resource_classes())?;
    let (app, may) = p.may(&s, Rule::ClassesDelete)?;
    app.placement().classes().delete(&may, &name).await.map_err(|e| match e {
        berth_app::Error::Domain(e) if matches!(e.kind, ErrorKind::Invalid | ErrorKind::InUse) => {
            domain(e, "Error in delete resource class: ")
        }
        e => e.into(),
    })?;
    Ok(p.empty(StatusCode::NO_CONTENT, None))
}
