//! `GET /v1/plugins`: the enabled resource types, as Blazar lists its
//! plugins, with Berth's additions (the driver each acts through, the
//! parameters a compiled-in one takes and their types); and
//! `GET /v1/plugins/schema`: the protocol external plugins speak, as JSON
//! Schemas (`berth-plugins/schema/protocol.json`).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

/// One enabled resource type.
#[allow(dead_code)] // a schema: the handler builds the JSON
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Plugin {
    /// The resource type, as reservations name it (Blazar's plugin name).
    name: String,
    resource_type: String,
    /// `noop`, `webhook` or `exec`; null for a plugin with no driver.
    driver: Option<String>,
    /// Served over the protocol (`[plugins.external]`) rather than compiled in.
    external: bool,
    /// The parameters a reservation of this type takes, with their types;
    /// null when the plugin checks its own (external plugins, in validate).
    parameters: Option<Vec<Parameter>>,
}

/// A declared parameter.
#[allow(dead_code)] // a schema: the handler builds the JSON
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Parameter {
    name: String,
    /// `integer`, `boolean`, `optional_boolean`, `string`, `string_list`, `query` or `id`.
    #[serde(rename = "type")]
    kind: String,
}

#[allow(dead_code)] // a schema: the handler builds the JSON
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Plugins {
    plugins: Vec<Plugin>,
}

#[utoipa::path(
    get,
    path = "/v1/plugins",
    tag = tags::ADDITIONS,
    summary = "The enabled resource types, with their drivers and parameters",
    responses(
        (status = 200, description = "The enabled plugins", body = Plugins),
    ),
)]
pub(super) async fn list(State(state): State<AppState>, ctx: Context) -> Result<Json<Value>, ApiError> {
    let plugins: Vec<Value> = app(&state)
        .plugins()
        .list(&caller(&state, &ctx))?
        .into_iter()
        .map(|p| {
            let parameters = p.parameters.map(|declared| {
                declared.iter().map(|(name, kind)| json!({"name": name, "type": kind})).collect::<Vec<_>>()
            });
            json!({
                "name": p.resource_type,
                "resource_type": p.resource_type,
                "driver": p.driver,
                "external": p.external,
                "parameters": parameters,
            })
        })
        .collect();
    Ok(Json(json!({ "plugins": plugins })))
}

#[utoipa::path(
    get,
    path = "/v1/plugins/schema",
    tag = tags::ADDITIONS,
    summary = "The plugin protocol as JSON Schemas: the envelope, each action's payload and answer",
    responses(
        (status = 200, description = "A JSON Schema (draft 2020-12) document; `x-actions` maps each action to its payload and answer under `$defs`", body = Object),
    ),
)]
pub(super) async fn schema(ctx: Context, State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(app(&state).plugins().schema(&caller(&state, &ctx))?.clone()))
}
