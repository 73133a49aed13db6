//! `GET /v1/plugins`: the enabled resource types, as Blazar lists its
//! plugins, with Berth's additions (the driver each acts through, the
//! parameters a compiled-in one takes and their types); and
//! `GET /v1/plugins/schema`: the protocol external plugins speak, as JSON
//! Schemas (`berth-plugins/schema/protocol.json`).

use axum::extract::State;
use axum::Json;
use berth_app::plugins::PluginInfo;
use serde_json::Value;

use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

/// One enabled resource type.
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
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Parameter {
    name: String,
    /// `integer`, `boolean`, `optional_boolean`, `string`, `string_list`, `query` or `id`.
    #[serde(rename = "type")]
    kind: String,
}

impl Plugin {
    /// The plugin as the list shows it: named by its resource type, as
    /// Blazar names its plugins.
    fn of(p: PluginInfo) -> Plugin {
        let parameters = p.parameters.map(|declared| {
            declared
                .into_iter()
                .map(|(name, kind)| Parameter { name: name.to_string(), kind: kind.to_string() })
                .collect()
        });
        Plugin {
            name: p.resource_type.clone(),
            resource_type: p.resource_type,
            driver: p.driver.map(str::to_string),
            external: p.external,
            parameters,
        }
    }
}

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
pub(super) async fn list(State(state): State<AppState>, ctx: Context) -> Result<Json<Plugins>, ApiError> {
    let plugins = app(&state).plugins().list(&caller(&state, &ctx))?.into_iter().map(Plugin::of).collect();
    Ok(Json(Plugins { plugins }))
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
