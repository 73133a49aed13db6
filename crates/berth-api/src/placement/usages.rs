//! `/resource_providers/{uuid}/usages` and `/usages` (1.9 on): what is held now.

use std::collections::BTreeMap;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_app::placement::usages::{ConsumerTypeFilter, UsageRow};
use berth_app::placement::Rule;
use berth_app::Owner;
use berth_core::names::class_rank;
use serde_json::{json, Map, Value};

use super::bodies;
use super::http::{served_now, Pl, Query};
use super::providers::provider_uuid;
use super::schemas;
use crate::error::ApiError;
use crate::tags;
use crate::AppState;

#[utoipa::path(
    get,
    path = "/placement/resource_providers/{uuid}/usages",
    tag = tags::PLACEMENT,
    summary = "What a provider holds now, by class",
    responses(
        (status = 200, description = "By class", body = bodies::ProviderUsages),
    ),
)]
pub async fn provider(p: Pl, State(s): State<AppState>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    p.accept_json()?;
    let (app, may) = p.may(&s, Rule::ProviderUsages)?;
    let uuid = provider_uuid(&raw)?;
    let (rp, usages) = app.placement().usages().of_provider(&may, uuid).await?;
    let body = json!({"resource_provider_generation": rp.generation, "usages": in_class_order(usages)});
    Ok(p.json(StatusCode::OK, &body, served_now()))
}

/// A project's (or one of its users') usage. Admins and services may ask
/// about any project; others about their own.
#[utoipa::path(
    get,
    path = "/placement/usages",
    tag = tags::PLACEMENT,
    summary = "A project's (or user's) usage now, by class or consumer type",
    params(
        ("project_id" = String, Query, description = "The project"),
        ("user_id" = Option<String>, Query, description = "One of its users"),
        ("consumer_type" = Option<String>, Query, description = "A consumer type, `all` or `unknown` (1.38 on)"),
    ),
    responses(
        (status = 200, description = "By class (by consumer type from 1.38)", body = bodies::Usages),
    ),
)]
pub async fn totals(p: Pl, State(s): State<AppState>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    p.since(p.mv.total_usages())?;
    p.accept_json()?;
    let q = Query::parse(raw.as_deref());
    let (project, user) = (q.get("project_id"), q.get("user_id"));
    let (app, may) = p.may_on(&s, Rule::Usages, Owner::Asked { project, user })?;
    q.validate(&schemas::usages(p.mv))?;
    let filter = p.mv.consumer_types().then(|| match q.get("consumer_type") {
        None => ConsumerTypeFilter::ByType,
        Some("all") => ConsumerTypeFilter::All,
        Some("unknown") => ConsumerTypeFilter::Untyped,
        Some(t) => ConsumerTypeFilter::Named(t.to_string()),
    });
    let asked = (project.unwrap_or_default(), user);
    let rows = app.placement().usages().of_project(&may, asked, filter.as_ref()).await?;
    Ok(p.json(StatusCode::OK, &json!({"usages": usages_json(rows, filter.is_some())}), served_now()))
}

/// A project's usage by class, or (`by_type`) by consumer type then class,
/// classes in Placement's order.
fn usages_json(mut rows: Vec<UsageRow>, by_type: bool) -> Value {
    rows.sort_by(|a, b| class_rank(&a.resource_class).cmp(&class_rank(&b.resource_class)));
    if !by_type {
        return Value::Object(rows.into_iter().map(|r| (r.resource_class, json!(r.used))).collect());
    }
    let mut groups: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for r in rows {
        let g = groups.entry(r.group.unwrap_or_else(|| "unknown".into())).or_default();
        g.insert(r.resource_class, json!(r.used));
        g.insert("consumer_count".into(), json!(r.consumer_count));
    }
    json!(groups)
}

/// Amounts by class, in Placement's order of classes.
fn in_class_order(by_class: impl IntoIterator<Item = (String, i64)>) -> Map<String, Value> {
    let mut v: Vec<(String, i64)> = by_class.into_iter().collect();
    v.sort_by(|a, b| class_rank(&a.0).cmp(&class_rank(&b.0)));
    v.into_iter().map(|(c, n)| (c, json!(n))).collect()
}
