//! `/v1/leases`: create, list, show, update, delete.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use berth_core::dates::{self, format_date, parse_date, DateSpec};
use berth_core::lease::{self, codes, LeaseEventType, LeaseStatus, Occurrence};
use berth_core::time::DateMath;
use berth_store::commands::{LeaseDates, LeaseUpdate, NewLease, NewReservation, ReservationUpdate};
use berth_store::queries::leases::{Lease, LeaseFilter};
use chrono::{DateTime, Duration, Utc};
use croner::Cron;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::config::ApiConfig;
use crate::paging::Page;

use super::{meta, object_body, opt_str, path_id};
use crate::access::{Action, Target};
use crate::auth::Context;
use crate::error::ApiError;
use crate::AppState;

/// The lease as Blazar shows it.
pub(super) fn lease_json(l: &Lease) -> Value {
    let r = &l.record;
    let reservations: Vec<Value> = r
        .reservations
        .iter()
        .zip(&l.reservation_updated_at)
        .map(|(res, updated)| {
            let mut o = res.params.as_object().cloned().unwrap_or_default();
            o.insert("id".into(), json!(res.id));
            o.insert("lease_id".into(), json!(r.id));
            o.insert("resource_type".into(), json!(res.resource_type));
            o.insert("resource_id".into(), json!(res.resource_id));
            o.insert("status".into(), json!(res.status.as_str()));
            o.insert("missing_resources".into(), json!(false));
            o.insert("resources_changed".into(), json!(false));
            o.insert("created_at".into(), json!(format_date(res.created_at)));
            o.insert("updated_at".into(), json!(format_date(*updated)));
            o.insert(
                "allocations".into(),
                json!(res
                    .slots
                    .iter()
                    .map(|s| json!({"resource_id": s.provider, "consumer_id": s.consumer, "resources": s.resources}))
                    .collect::<Vec<_>>()),
            );
            Value::Object(o)
        })
        .collect();
    let events: Vec<Value> = r
        .events
        .iter()
        .zip(&l.event_details)
        .map(|(e, d)| {
            json!({
                "id": e.id,
                "lease_id": r.id,
                "event_type": e.event_type.as_str(),
                "time": format_date(e.time),
                "status": e.status.as_str(),
                "attempts": d.attempts,
                "last_error": d.last_error,
                "created_at": format_date(d.created_at),
                "updated_at": format_date(d.updated_at),
            })
        })
        .collect();
    json!({
        "id": r.id,
        "name": r.name,
        "start_date": format_date(r.start),
        "end_date": format_date(r.end),
        "before_end_date": r.event(LeaseEventType::BeforeEndLease).map(|e| format_date(e.time)),
        "status": r.status.as_str(),
        "degraded": r.degraded,
        "user_id": r.user_id,
        "project_id": r.project_id,
        "trust_id": null,
        "recurrence_id": r.recurrence_id,
        "created_at": format_date(l.created_at),
        "updated_at": format_date(l.updated_at),
        "reservations": reservations,
        "events": events,
    })
}

/// The project whose leases `ctx` sees (`None`: every project's).
fn scope<'c>(state: &AppState, ctx: &'c Context) -> Option<&'c str> {
    state.rules.visible_project(ctx, Action::LeasesGetAllProjects)
}

fn lease_target(lease: &Lease) -> Target<'_> {
    Target::owned(&lease.record.project_id, &lease.record.user_id)
}

fn date_field(obj: &Map<String, Value>, key: &str) -> Result<Option<DateSpec>, ApiError> {
    Ok(match opt_str(obj, key)? {
        Some(s) => Some(parse_date(key, s)?),
        None => None,
    })
}

/// An absolute date, `now` being the database's time of the request.
fn fixed_date(
    obj: &Map<String, Value>,
    key: &str,
    now: chrono::DateTime<Utc>,
) -> Result<Option<chrono::DateTime<Utc>>, ApiError> {
    match date_field(obj, key)? {
        Some(DateSpec::Now) => Ok(Some(now)),
        Some(DateSpec::At(t)) => Ok(Some(t)),
        None => Ok(None),
    }
}

/// The reservation's parameters as shown back: everything but its type and id.
fn params_of(r: &Map<String, Value>) -> Value {
    let mut p = r.clone();
    p.remove("resource_type");
    p.remove("id");
    Value::Object(p)
}

async fn resolve(state: &AppState, resource_type: &str, params: &Value) -> Result<NewReservation, ApiError> {
    let plugin = state.plugins.get(resource_type)?;
    // Parameters the plugin declares are checked and read as their types
    // here; the others' plugins check their own in validate.
    let params = match plugin.parameters() {
        Some(declared) => &berth_plugins::params::normalize(resource_type, declared, params)?,
        None => params,
    };
    let request = plugin.validate(params).await?;
    let demand = berth_plugins::host::demand(&request)?;
    Ok(NewReservation { resource_type: resource_type.to_string(), params: params.clone(), demand })
}

/// The consumers the reservations name for their hooks (instances to wake
/// up and delete) must be the caller's project's in Placement, unless the
/// rules let the caller name any (admins): a hook must never act on what
/// another project owns.
async fn check_named_consumers(state: &AppState, ctx: &Context, list: &[NewReservation]) -> Result<(), ApiError> {
    if state.rules.allows(ctx, Action::LeasesNameAnyInstance, &Target::own(ctx)) {
        return Ok(());
    }
    let mut named = Vec::new();
    for r in list {
        for id in state.plugins.get(&r.resource_type)?.named_consumers(&r.params) {
            let uuid = Uuid::parse_str(&id).map_err(|_| unknown_consumer(&id))?;
            named.push((id, uuid));
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    let uuids: Vec<Uuid> = named.iter().map(|(_, u)| *u).collect();
    let projects = state.store.consumer_projects(&uuids).await?;
    for (id, uuid) in &named {
        match projects.get(uuid) {
            None => return Err(unknown_consumer(id)),
            Some(p) if *p != ctx.project_id => {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    codes::FOREIGN_INSTANCE,
                    format!("instance {id} belongs to another project"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn unknown_consumer(id: &str) -> ApiError {
    ApiError::bad_request(
        codes::UNKNOWN_INSTANCE,
        format!("instance {id:?} is not a consumer of your project in /placement"),
    )
}

pub(super) async fn reservations(state: &AppState, v: Option<&Value>) -> Result<Vec<NewReservation>, ApiError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(ApiError::bad_request(codes::INVALID_LEASE, "reservations must be a list")),
    };
    if list.len() > lease::MAX_RESERVATIONS {
        return Err(ApiError::bad_request(
            codes::INVALID_LEASE,
            format!("a lease carries at most {} reservations", lease::MAX_RESERVATIONS),
        ));
    }
    let mut out = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let Some(obj) = r.as_object() else {
            return Err(ApiError::bad_request(codes::INVALID_LEASE, format!("reservation {i} is not an object")));
        };
        let Some(rt) = opt_str(obj, "resource_type")? else {
            return Err(ApiError::bad_request(codes::INVALID_LEASE, format!("reservation {i} needs a resource_type")));
        };
        out.push(resolve(state, rt, &params_of(obj)).await?);
    }
    Ok(out)
}

/// A recurring lease's occurrences: a cron schedule as crontab reads it
/// (five fields, minute to day of week; day of week 0 or 7 is Sunday, 1
/// Monday; names such as `mon-fri`; a day of month and a day of week both
/// restricted match either, as in Vixie cron), in UTC; a duration each;
/// an end; at most `max` of them.
pub(super) fn occurrences(rec: &Value, from: chrono::DateTime<Utc>, max: usize) -> Result<Vec<Occurrence>, ApiError> {
    let bad = |m: String| ApiError::bad_request(codes::INVALID_LEASE, format!("recurrence: {m}"));
    let Some(obj) = rec.as_object() else {
        return Err(bad("must be an object with cron, duration and until".into()));
    };
    let expr = opt_str(obj, "cron")?.ok_or_else(|| bad("cron is required".into()))?;
    if expr.split_whitespace().count() != 5 {
        return Err(bad(format!("cron {expr:?} must have five fields: minute hour day-of-month month day-of-week")));
    }
    let schedule = Cron::new(expr).parse().map_err(|e| bad(format!("cron {expr:?}: {e}")))?;
    let duration = dates::duration_from_json("recurrence.duration", obj.get("duration").unwrap_or(&Value::Null))?;
    let until = match date_field(obj, "until")? {
        Some(DateSpec::At(t)) => t,
        _ => return Err(bad("until (a date) is required".into())),
    };
    Ok(lease::occurrences(schedule.iter_from(from), from, until, duration, max)?)
}

/// Creates a lease (one per occurrence when recurring). With
/// `"dry_run": true` it writes nothing and answers the occurrences, each
/// with whether it fits.
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(config): Extension<Arc<ApiConfig>>,
    ctx: Context,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    state.rules.authorize(&ctx, Action::LeasesCreate, &Target::own(&ctx))?;
    let obj = object_body(&body, "lease")?;
    let dry_run = match obj.get("dry_run") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(ApiError::bad_request(codes::INVALID_LEASE, format!("dry_run must be true or false, not {v}")))
        }
    };
    let Some(name) = opt_str(&obj, "name")? else {
        return Err(ApiError::bad_request(codes::INVALID_LEASE, "name is required"));
    };
    let start = date_field(&obj, "start_date")?.unwrap_or(DateSpec::Now);
    let reservations = reservations(&state, obj.get("reservations")).await?;
    // The database's time, for what must be resolved before the command
    // (occurrences, the policy service's view); the command resolves
    // `start_date: now` and checks "in the past" again in its transaction.
    let now = state.store.now().await?;
    let dates = match obj.get("recurrence") {
        Some(rec) if !rec.is_null() => {
            LeaseDates::Recurring(occurrences(rec, start.resolve(now), config.max_occurrences)?)
        }
        _ => {
            let Some(end) = date_field(&obj, "end_date")? else {
                return Err(ApiError::bad_request(codes::INVALID_DATE, "end_date is required"));
            };
            LeaseDates::One { start, end, before_end: fixed_date(&obj, "before_end_date", now)? }
        }
    };
    check_named_consumers(&state, &ctx, &reservations).await?;
    let new = NewLease {
        name: name.to_string(),
        project_id: ctx.project_id.clone(),
        user_id: ctx.user_id.clone(),
        dates,
        reservations,
    };
    super::policy::check_create(&state, &new, now).await?;
    if dry_run {
        return Ok((StatusCode::OK, Json(dry_run_answer(&state, &new, now).await?)));
    }
    let made = state.store.create_lease(&meta(&ctx), new).await?;
    let mut out = lease_json(&made[0]);
    if made.len() > 1 {
        let ids: Vec<_> = made.iter().map(|l| l.record.id).collect();
        out["recurrence"] = json!({"id": made[0].record.recurrence_id, "leases": ids});
    }
    Ok((StatusCode::CREATED, Json(json!({ "lease": out }))))
}

/// What `new` would book: each window and whether its reservations fit
/// there now (capacity; quotas are checked when the lease is made).
async fn dry_run_answer(state: &AppState, new: &NewLease, now: DateTime<Utc>) -> Result<Value, ApiError> {
    let windows = match &new.dates {
        LeaseDates::One { start, end, .. } => vec![(start.resolve(now), end.resolve(now))],
        LeaseDates::Recurring(occ) => occ.clone(),
    };
    let mut out = Vec::with_capacity(windows.len());
    for (start, end) in windows {
        let fits =
            end > start && !state.store.availability(&new.reservations, end - start, start, end, 1).await?.is_empty();
        out.push(json!({"start_date": format_date(start), "end_date": format_date(end), "fits": fits}));
    }
    Ok(json!({"dry_run": true, "count": out.len(), "occurrences": out}))
}

pub(super) async fn list(
    State(state): State<AppState>,
    Extension(config): Extension<Arc<ApiConfig>>,
    ctx: Context,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    state.rules.authorize(&ctx, Action::LeasesList, &Target::own(&ctx))?;
    let bad = |m: String| ApiError::bad_request(codes::INVALID_LEASE, m);
    let project_id = match (q.get("project_id"), scope(&state, &ctx)) {
        (Some(p), None) => Some(p.clone()),
        (None, None) => None,
        (Some(p), Some(own)) if p != own => return Err(ApiError::forbidden()),
        (_, Some(own)) => Some(own.to_string()),
    };
    let status = match q.get("status") {
        Some(s) => Some(LeaseStatus::parse(s).ok_or_else(|| bad(format!("status {s:?} is not a lease status")))?),
        None => None,
    };
    let page = Page::of(&q, config.max_page)?;
    let marker = match &page.marker {
        Some(m) => Some(Uuid::parse_str(m).map_err(|_| bad(format!("marker {m:?} is not a lease id")))?),
        None => None,
    };
    let filter = LeaseFilter { project_id, status, marker, limit: Some(page.sql_limit()) };
    let leases = state.store.leases(&filter).await?;
    Ok(Json(page.answer("leases", "/v1/leases", &q, leases.iter().map(lease_json).collect(), "id")))
}

pub(super) async fn show(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = path_id(&id, "lease", codes::LEASE_NOT_FOUND)?;
    let lease = state.store.lease(id, scope(&state, &ctx)).await?;
    state.rules.authorize(&ctx, Action::LeasesGet, &lease_target(&lease))?;
    Ok(Json(json!({ "lease": lease_json(&lease) })))
}

/// A relative move (`prolong_for` and the like) of `base`.
fn shifted(
    obj: &Map<String, Value>,
    field: &str,
    plus: &str,
    minus: &str,
    base: chrono::DateTime<Utc>,
) -> Result<Option<DateSpec>, ApiError> {
    let d = |k: &str| -> Result<Option<Duration>, ApiError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => Ok(Some(dates::duration_from_json(k, v)?)),
        }
    };
    match (d(plus)?, d(minus)?) {
        (Some(_), Some(_)) => {
            Err(ApiError::bad_request(codes::INVALID_LEASE, format!("{plus} and {minus} cannot be given together")))
        }
        (Some(p), None) => Ok(Some(DateSpec::At(base.plus(field, p)?))),
        (None, Some(m)) => Ok(Some(DateSpec::At(base.minus(field, m)?))),
        (None, None) => Ok(None),
    }
}

pub(super) async fn update(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = path_id(&id, "lease", codes::LEASE_NOT_FOUND)?;
    let obj = object_body(&body, "lease")?;
    let current = state.store.lease(id, scope(&state, &ctx)).await?;
    state.rules.authorize(&ctx, Action::LeasesUpdate, &lease_target(&current))?;
    let r = &current.record;
    let mut end = date_field(&obj, "end_date")?;
    if let Some(e) = shifted(&obj, "end_date", "prolong_for", "reduce_by", r.end)? {
        if end.is_some() {
            return Err(ApiError::bad_request(codes::INVALID_LEASE, "end_date and a relative move of it conflict"));
        }
        end = Some(e);
    }
    let mut start = date_field(&obj, "start_date")?;
    if let Some(s) = shifted(&obj, "start_date", "defer_by", "advance_by", r.start)? {
        if start.is_some() {
            return Err(ApiError::bad_request(codes::INVALID_LEASE, "start_date and a relative move of it conflict"));
        }
        start = Some(s);
    }
    let mut changes = Vec::new();
    match obj.get("reservations") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, given) in list.iter().enumerate() {
                let Some(given) = given.as_object() else {
                    return Err(ApiError::bad_request(
                        codes::INVALID_LEASE,
                        format!("reservation {i} is not an object"),
                    ));
                };
                let rid = opt_str(given, "id")?.and_then(|s| Uuid::parse_str(s).ok()).ok_or_else(|| {
                    ApiError::bad_request(
                        codes::INVALID_LEASE,
                        format!("reservation {i} needs the id of one of the lease's reservations"),
                    )
                })?;
                let Some(existing) = r.reservations.iter().find(|x| x.id == rid) else {
                    return Err(ApiError::bad_request(
                        codes::INVALID_LEASE,
                        format!("lease {id} has no reservation {rid}"),
                    ));
                };
                let mut params = existing.params.as_object().cloned().unwrap_or_default();
                for (k, v) in params_of(given).as_object().into_iter().flatten() {
                    params.insert(k.clone(), v.clone());
                }
                let resolved = resolve(&state, &existing.resource_type, &Value::Object(params)).await?;
                check_named_consumers(&state, &ctx, std::slice::from_ref(&resolved)).await?;
                changes.push(ReservationUpdate { id: rid, params: resolved.params, demand: resolved.demand });
            }
        }
        Some(_) => return Err(ApiError::bad_request(codes::INVALID_LEASE, "reservations must be a list")),
    }
    let now = state.store.now().await?;
    let update = LeaseUpdate {
        name: opt_str(&obj, "name")?.map(str::to_string),
        start,
        end,
        before_end: fixed_date(&obj, "before_end_date", now)?,
        reservations: changes,
    };
    if update.name.is_none()
        && update.start.is_none()
        && update.end.is_none()
        && update.before_end.is_none()
        && update.reservations.is_empty()
    {
        return Err(ApiError::bad_request(codes::INVALID_LEASE, "nothing to update"));
    }
    if matches!(update.end, Some(DateSpec::At(t)) if t > r.end) {
        state.rules.authorize(&ctx, Action::LeasesExtend, &lease_target(&current))?;
    }
    super::policy::check_update(&state, &current, &update, now).await?;
    state.store.update_lease(&meta(&ctx), id, scope(&state, &ctx), update).await?;
    let lease = state.store.lease(id, None).await?;
    Ok(Json(json!({ "lease": lease_json(&lease) })))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    ctx: Context,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "lease", codes::LEASE_NOT_FOUND)?;
    let lease = state.store.lease(id, scope(&state, &ctx)).await?;
    state.rules.authorize(&ctx, Action::LeasesDelete, &lease_target(&lease))?;
    state.store.delete_lease(&meta(&ctx), id, scope(&state, &ctx)).await?;
    super::policy::on_end(&state, &lease).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Fuzz target: recurrences as users type them, bounded to a fixed number
/// of cases.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// One crontab field: numbers in and out of range, names, ranges,
    /// steps, lists, and Quartz's extensions crontab lacks.
    fn field() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            Just("*".to_string()),
            (0u32..100).prop_map(|n| n.to_string()),
            prop::sample::select(vec!["mon", "FRI", "sun", "jan", "dec", "L", "?", "W", "5#2", "-1"])
                .prop_map(str::to_string),
        ];
        let part = (atom.clone(), prop::option::of(atom), prop::option::of(0u32..70)).prop_map(|(a, b, step)| {
            let mut s = a;
            if let Some(b) = b {
                s = format!("{s}-{b}");
            }
            if let Some(step) = step {
                s = format!("{s}/{step}");
            }
            s
        });
        prop::collection::vec(part, 1..4).prop_map(|parts| parts.join(","))
    }

    fn cron() -> impl Strategy<Value = String> {
        let pick = |xs: &[&'static str]| prop::sample::select(xs.to_vec());
        // Mostly valid: one firing a day at most, so that most are booked.
        let usual = (
            0u32..60,
            0u32..24,
            pick(&["*", "1", "15", "31", "1-10", "*/2", "1,15"]),
            pick(&["*", "1-12", "jan", "feb,mar", "*/3", "2"]),
            pick(&["*", "0", "7", "1", "mon-fri", "sat,sun", "1-5/2", "SUN"]),
        )
            .prop_map(|(m, h, dom, mon, dow)| format!("{m} {h} {dom} {mon} {dow}"));
        prop_oneof![
            usual,
            prop::collection::vec(field(), 5).prop_map(|f| f.join(" ")),
            prop::collection::vec(field(), 0..8).prop_map(|f| f.join(" ")),
            any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, max_shrink_time: 10_000, ..ProptestConfig::default() })]

        #[test]
        fn any_recurrence_books_at_most_the_cap_within_its_range_or_is_refused(
            expr in cron(),
            days in 0i64..400,
            hours in 1i64..24,
        ) {
            let from = chrono::DateTime::parse_from_rfc3339("2031-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
            let until = from.plus("until", Duration::days(days)).unwrap();
            let rec = json!({"cron": expr, "duration": format!("{hours}h"), "until": format_date(until)});
            match occurrences(&rec, from, 100) {
                Ok(found) => {
                    prop_assert!(found.len() <= 100);
                    for (start, end) in found {
                        prop_assert!(from <= start && start < until && Ok(end) == start.plus("end", Duration::hours(hours)));
                    }
                }
                Err(e) => prop_assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}: {}", expr, e.detail),
            }
        }
    }
}
