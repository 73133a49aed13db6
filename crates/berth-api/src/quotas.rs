//! Quotas under `/v1/quotas`: limits at the defaults, per project (also
//! reachable as `tenants`) and per user within a project, and usage over a
//! window. Admins write; a member reads its own project's limits and usage.
//! Bodies are `{"quotas": {"VCPU": 100, "leases": 10}}` (`-1`: unlimited;
//! `null`: remove that limit); a GET answers the limits in effect.

use std::collections::{BTreeMap, HashMap};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use berth_app::quotas::{Limits, OverLimit, Scope, Source};
use berth_core::dates::format_date;
use berth_core::error::ErrorCode;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;

use crate::auth::Context;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

/// The document of these routes; `tenants` is an alias of `projects`, as
/// [`routes`] serves it.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(
        show_defaults,
        set_defaults,
        show_project,
        set_project,
        unset_project,
        project_usage,
        show_user,
        set_user,
        unset_user,
        user_usage,
    ))]
    struct Doc;
    let mut doc = <Doc as utoipa::OpenApi>::openapi();
    let aliases: Vec<(String, utoipa::openapi::PathItem)> = doc
        .paths
        .paths
        .iter()
        .filter_map(|(path, item)| {
            let rest = path.strip_prefix("/v1/quotas/projects/")?;
            Some((format!("/v1/quotas/tenants/{rest}"), item.clone()))
        })
        .collect();
    for (path, item) in aliases {
        doc.paths.paths.insert(path, item);
    }
    doc
}

/// A scope left over a limit by a change.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct OverQuota {
    project_id: Option<String>,
    user_id: Option<String>,
    resource: String,
    limit: i64,
    usage: i64,
}

/// The limits in effect by resource (-1: unlimited).
#[derive(serde::Serialize, utoipa::ToSchema)]
struct QuotaLimits {
    quotas: BTreeMap<String, i64>,
    /// Where each limit in `quotas` was set: `user` (the user's own),
    /// `project` (inherited by a user from its project) or `default`.
    sources: BTreeMap<String, QuotaSource>,
    over_limit: Vec<OverQuota>,
}

/// The level a limit in effect was set at.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
enum QuotaSource {
    User,
    Project,
    Default,
}

/// `{"quotas": {"VCPU": 100, "leases": 10}}` (or the bare object): -1 is
/// unlimited, null removes the limit.
#[derive(serde::Deserialize, utoipa::ToSchema)]
struct QuotaChange {
    quotas: BTreeMap<String, Option<i64>>,
}

impl QuotaChange {
    /// The body read by serde, the bare object taken as the quotas; a limit
    /// serde cannot read is refused by name, with the value given.
    fn read(body: &Bytes) -> Result<QuotaChange, ApiError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("the body is not JSON: {e}")))?;
        let Value::Object(mut obj) = v else {
            return Err(bad("the body must be a JSON object"));
        };
        let quotas = match obj.remove("quotas") {
            Some(q @ Value::Object(_)) if obj.is_empty() => q,
            Some(_) => return Err(bad("quotas must be an object of resource names to limits, and alone")),
            None => Value::Object(obj),
        };
        let whole = Value::Object(Map::from_iter([("quotas".to_string(), quotas)]));
        serde_path_to_error::deserialize(&whole).map_err(|e| {
            let resource = match e.path().iter().nth(1) {
                Some(Segment::Map { key }) => key.as_str(),
                _ => "a resource",
            };
            let given = whole["quotas"].get(resource).unwrap_or(&Value::Null);
            bad(format!("the limit of {resource} must be a whole number (-1: unlimited), not {given}"))
        })
    }

    /// The limits to set and (null) to remove, refused as [`checked`] does.
    fn limits(self) -> Result<(BTreeMap<String, i64>, Vec<String>), ApiError> {
        let (mut set, mut unset) = (BTreeMap::new(), Vec::new());
        for (k, v) in self.quotas {
            match v {
                Some(limit) => {
                    set.insert(k, limit);
                }
                None => unset.push(k),
            }
        }
        checked(set, unset)
    }
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct ResourceUse {
    limit: i64,
    in_use: i64,
    peak: i64,
    over_limit: bool,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct QuotaUsage {
    project_id: String,
    user_id: Option<String>,
    start: String,
    end: String,
    usage: BTreeMap<String, ResourceUse>,
}

pub fn routes() -> Router<AppState> {
    let mut r = Router::new().route("/v1/quotas/defaults", get(show_defaults).put(set_defaults));
    for projects in ["projects", "tenants"] {
        let p = format!("/v1/quotas/{projects}/{{project_id}}");
        r = r
            .route(&p, get(show_project).put(set_project).delete(unset_project))
            .route(&format!("{p}/usage"), get(project_usage))
            .route(&format!("{p}/users/{{user_id}}"), get(show_user).put(set_user).delete(unset_user))
            .route(&format!("{p}/users/{{user_id}}/usage"), get(user_usage));
    }
    r
}

fn bad(detail: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::QuotaInvalid, detail)
}

fn scope(project: Option<String>, user: Option<String>) -> Result<Scope, ApiError> {
    let s = Scope { project_id: project, user_id: user };
    s.validate()?;
    Ok(s)
}

fn over_json(over: &[OverLimit]) -> Vec<OverQuota> {
    over.iter()
        .map(|o| OverQuota {
            project_id: o.scope.project_id.clone(),
            user_id: o.scope.user_id.clone(),
            resource: o.resource.clone(),
            limit: o.limit,
            usage: o.usage,
        })
        .collect()
}

fn answer(limits: Limits) -> Json<QuotaLimits> {
    let source = |s: &Source| match s {
        Source::User => QuotaSource::User,
        Source::Project => QuotaSource::Project,
        Source::Default => QuotaSource::Default,
    };
    let sources = limits.sources.iter().map(|(k, s)| (k.clone(), source(s))).collect();
    Json(QuotaLimits { over_limit: over_json(&limits.over_limit), quotas: limits.quotas, sources })
}

/// `{"quotas": {...}}` (or the bare object): limits to set and (null) to remove.
fn parse_limits(body: &Bytes) -> Result<(BTreeMap<String, i64>, Vec<String>), ApiError> {
    QuotaChange::read(body)?.limits()
}

/// Limits to set and to remove, refused when there are none or one names
/// no resource or is no limit.
fn checked(set: BTreeMap<String, i64>, unset: Vec<String>) -> Result<(BTreeMap<String, i64>, Vec<String>), ApiError> {
    if set.is_empty() && unset.is_empty() {
        return Err(bad("give at least one limit, e.g. {\"quotas\": {\"VCPU\": 10}}"));
    }
    for (k, v) in &set {
        berth_core::quota::check_limit(k, *v)?;
    }
    for k in &unset {
        berth_core::quota::check_resource(k)?;
    }
    Ok((set, unset))
}

async fn write(state: &AppState, ctx: &Context, scope: Scope, body: &Bytes) -> Result<Json<QuotaLimits>, ApiError> {
    let (app, caller) = (app(state), caller(state, ctx));
    let may = app.quotas().may_set(&caller, &scope)?;
    let asked = parse_limits(body)?;
    Ok(answer(app.quotas().set(&caller, may, scope, asked).await?))
}

#[utoipa::path(
    get,
    path = "/v1/quotas/defaults",
    tag = tags::ADDITIONS,
    summary = "The default limits",
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn show_defaults(State(state): State<AppState>, ctx: Context) -> Result<Json<QuotaLimits>, ApiError> {
    let scope = Scope::defaults();
    Ok(answer(app(&state).quotas().show(&caller(&state, &ctx), &scope).await?))
}

#[utoipa::path(
    put,
    path = "/v1/quotas/defaults",
    tag = tags::ADDITIONS,
    summary = "Set default limits (-1 unlimited, null removes)",
    request_body = QuotaChange,
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn set_defaults(State(state): State<AppState>, ctx: Context, body: Bytes) -> Result<Json<QuotaLimits>, ApiError> {
    write(&state, &ctx, Scope::defaults(), &body).await
}

#[utoipa::path(
    get,
    path = "/v1/quotas/projects/{project_id}",
    tag = tags::ADDITIONS,
    summary = "A project's limits in effect",
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn show_project(
    State(state): State<AppState>,
    ctx: Context,
    Path(project): Path<String>,
) -> Result<Json<QuotaLimits>, ApiError> {
    let scope = scope(Some(project), None)?;
    Ok(answer(app(&state).quotas().show(&caller(&state, &ctx), &scope).await?))
}

#[utoipa::path(
    put,
    path = "/v1/quotas/projects/{project_id}",
    tag = tags::ADDITIONS,
    summary = "Set a project's limits; reports any left over a limit",
    request_body = QuotaChange,
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn set_project(
    State(state): State<AppState>,
    ctx: Context,
    Path(project): Path<String>,
    body: Bytes,
) -> Result<Json<QuotaLimits>, ApiError> {
    write(&state, &ctx, scope(Some(project), None)?, &body).await
}

#[utoipa::path(
    delete,
    path = "/v1/quotas/projects/{project_id}",
    tag = tags::ADDITIONS,
    summary = "Remove a project's limits (back to the defaults)",
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn unset_project(
    State(state): State<AppState>,
    ctx: Context,
    Path(project): Path<String>,
) -> Result<Json<QuotaLimits>, ApiError> {
    let scope = scope(Some(project), None)?;
    Ok(answer(app(&state).quotas().unset(&caller(&state, &ctx), scope).await?))
}

#[utoipa::path(
    get,
    path = "/v1/quotas/projects/{project_id}/users/{user_id}",
    tag = tags::ADDITIONS,
    summary = "A user's limits in effect",
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn show_user(
    State(state): State<AppState>,
    ctx: Context,
    Path((project, user)): Path<(String, String)>,
) -> Result<Json<QuotaLimits>, ApiError> {
    let scope = scope(Some(project), Some(user))?;
    Ok(answer(app(&state).quotas().show(&caller(&state, &ctx), &scope).await?))
}

#[utoipa::path(
    put,
    path = "/v1/quotas/projects/{project_id}/users/{user_id}",
    tag = tags::ADDITIONS,
    summary = "Set a user's limits within its project",
    request_body = QuotaChange,
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn set_user(
    State(state): State<AppState>,
    ctx: Context,
    Path((project, user)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<QuotaLimits>, ApiError> {
    write(&state, &ctx, scope(Some(project), Some(user))?, &body).await
}

#[utoipa::path(
    delete,
    path = "/v1/quotas/projects/{project_id}/users/{user_id}",
    tag = tags::ADDITIONS,
    summary = "Remove a user's limits",
    responses(
        (status = 200, description = "The limits in effect, and any scope left over a limit", body = QuotaLimits),
    ),
)]
async fn unset_user(
    State(state): State<AppState>,
    ctx: Context,
    Path((project, user)): Path<(String, String)>,
) -> Result<Json<QuotaLimits>, ApiError> {
    let scope = scope(Some(project), Some(user))?;
    Ok(answer(app(&state).quotas().unset(&caller(&state, &ctx), scope).await?))
}

async fn usage(
    state: &AppState,
    ctx: &Context,
    project: String,
    user: Option<String>,
    q: &HashMap<String, String>,
) -> Result<Json<QuotaUsage>, ApiError> {
    let window = (q.get("start").map(String::as_str), q.get("end").map(String::as_str));
    let who = (project.as_str(), user.as_deref());
    let report = app(state).quotas().usage(&caller(state, ctx), who, window).await?;
    let usage = report
        .usage
        .iter()
        .map(|(k, u)| {
            (k.clone(), ResourceUse { limit: u.limit, in_use: u.in_use, peak: u.peak, over_limit: u.over_limit })
        })
        .collect();
    Ok(Json(QuotaUsage {
        project_id: project,
        user_id: user,
        start: format_date(report.start),
        end: format_date(report.end),
        usage,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/quotas/projects/{project_id}/usage",
    tag = tags::ADDITIONS,
    summary = "Limit, in use and peak per resource (start, end)",
    params(
        ("start" = Option<String>, Query, description = "From (default now)"),
        ("end" = Option<String>, Query, description = "Until (default open)"),
    ),
    responses(
        (status = 200, description = "Per resource", body = QuotaUsage),
    ),
)]
async fn project_usage(
    State(state): State<AppState>,
    ctx: Context,
    Path(project): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<QuotaUsage>, ApiError> {
    usage(&state, &ctx, project, None, &q).await
}

#[utoipa::path(
    get,
    path = "/v1/quotas/projects/{project_id}/users/{user_id}/usage",
    tag = tags::ADDITIONS,
    summary = "A user's usage over a window",
    params(
        ("start" = Option<String>, Query, description = "From (default now)"),
        ("end" = Option<String>, Query, description = "Until (default open)"),
    ),
    responses(
        (status = 200, description = "Per resource", body = QuotaUsage),
    ),
)]
async fn user_usage(
    State(state): State<AppState>,
    ctx: Context,
    Path((project, user)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<QuotaUsage>, ApiError> {
    usage(&state, &ctx, project, Some(user), &q).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[test]
    fn bodies_are_parsed_strictly() {
        let p = |s: &str| parse_limits(&Bytes::from(s.to_string()));
        let (set, unset) = p(r#"{"quotas": {"VCPU": 10, "leases": -1, "DISK_GB": null}}"#).unwrap();
        assert_eq!(set, BTreeMap::from([("VCPU".to_string(), 10), ("leases".to_string(), -1)]));
        assert_eq!(unset, vec!["DISK_GB".to_string()]);
        assert!(p(r#"{"VCPU": 3}"#).is_ok());
        for bad in [
            "nope",
            "[]",
            r#"{"quotas": {}}"#,
            r#"{"quotas": {"VCPU": "10"}}"#,
            r#"{"quotas": {"VCPU": 1.5}}"#,
            r#"{"quotas": {"VCPU": -2}}"#,
            r#"{"quotas": {"vcpu": 2}}"#,
            r#"{"quotas": {"VCPU": 2}, "extra": 1}"#,
        ] {
            let e = p(bad).unwrap_err();
            assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, ErrorCode::QuotaInvalid), "{bad}");
        }
    }

    #[test]
    fn refused_bodies_say_why() {
        let detail = |s: &str| parse_limits(&Bytes::from(s.to_string())).unwrap_err().detail;
        let not_whole = |k: &str, v: &str| format!("the limit of {k} must be a whole number (-1: unlimited), not {v}");
        assert!(detail("nope").starts_with("the body is not JSON: "));
        assert_eq!(detail("[]"), "the body must be a JSON object");
        let alone = "quotas must be an object of resource names to limits, and alone";
        assert_eq!(detail(r#"{"quotas": 5}"#), alone);
        assert_eq!(detail(r#"{"quotas": {"VCPU": 2}, "extra": 1}"#), alone);
        assert_eq!(detail(r#"{"quotas": {}}"#), "give at least one limit, e.g. {\"quotas\": {\"VCPU\": 10}}");
        assert_eq!(detail(r#"{"quotas": {"VCPU": "10"}}"#), not_whole("VCPU", "\"10\""));
        assert_eq!(detail(r#"{"quotas": {"VCPU": 1.5}}"#), not_whole("VCPU", "1.5"));
        assert_eq!(detail(r#"{"VCPU": 18446744073709551615}"#), not_whole("VCPU", "18446744073709551615"));
        // The first limit refused in the body's order.
        assert_eq!(detail(r#"{"VCPU": 1, "b": [1], "a": true}"#), not_whole("b", "[1]"));
        assert_eq!(detail(r#"{"quotas": {"x": {"y": 1}}}"#), not_whole("x", "{\"y\":1}"));
    }
}
