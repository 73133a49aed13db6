//! Reading a lease's body: dates, relative moves, reservations and their
//! parameters (checked by their plugins).

use berth_core::dates::{self, parse_date, DateSpec};
use berth_core::error::ErrorCode;
use berth_core::lease;
use berth_core::time::DateMath;
use berth_store::commands::{NewReservation, ReservationUpdate};
use berth_store::queries::leases::Lease;
use chrono::{Duration, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::instances;
use crate::auth::Context;
use crate::blazar::opt_str;
use crate::error::ApiError;
use crate::AppState;

pub(super) fn date_field(obj: &Map<String, Value>, key: &str) -> Result<Option<DateSpec>, ApiError> {
    Ok(match opt_str(obj, key)? {
        Some(s) => Some(parse_date(key, s)?),
        None => None,
    })
}

/// An absolute date, `now` being the database's time of the request.
pub(super) fn fixed_date(
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

pub(in crate::blazar) async fn reservations(
    state: &AppState,
    v: Option<&Value>,
) -> Result<Vec<NewReservation>, ApiError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(ApiError::bad_request(ErrorCode::InvalidLease, "reservations must be a list")),
    };
    if list.len() > lease::MAX_RESERVATIONS {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidLease,
            format!("a lease carries at most {} reservations", lease::MAX_RESERVATIONS),
        ));
    }
    let mut out = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let Some(obj) = r.as_object() else {
            return Err(ApiError::bad_request(ErrorCode::InvalidLease, format!("reservation {i} is not an object")));
        };
        let Some(rt) = opt_str(obj, "resource_type")? else {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidLease,
                format!("reservation {i} needs a resource_type"),
            ));
        };
        out.push(resolve(state, rt, &params_of(obj)).await?);
    }
    Ok(out)
}

/// A relative move (`prolong_for` and the like) of `base`.
pub(super) fn shifted(
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
            Err(ApiError::bad_request(ErrorCode::InvalidLease, format!("{plus} and {minus} cannot be given together")))
        }
        (Some(p), None) => Ok(Some(DateSpec::At(base.plus(field, p)?))),
        (None, Some(m)) => Ok(Some(DateSpec::At(base.minus(field, m)?))),
        (None, None) => Ok(None),
    }
}

/// The changes `PUT` asks of the lease's reservations: each names one by
/// id and the parameters to change; the result is checked as a new one is.
pub(super) async fn reservation_changes(
    state: &AppState,
    ctx: &Context,
    current: &Lease,
    given_list: Option<&Value>,
) -> Result<Vec<ReservationUpdate>, ApiError> {
    let mut changes = Vec::new();
    match given_list {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, given) in list.iter().enumerate() {
                let Some(given) = given.as_object() else {
                    return Err(ApiError::bad_request(
                        ErrorCode::InvalidLease,
                        format!("reservation {i} is not an object"),
                    ));
                };
                let rid = opt_str(given, "id")?.and_then(|s| Uuid::parse_str(s).ok()).ok_or_else(|| {
                    ApiError::bad_request(
                        ErrorCode::InvalidLease,
                        format!("reservation {i} needs the id of one of the lease's reservations"),
                    )
                })?;
                let Some(existing) = current.record.reservations.iter().find(|x| x.id == rid) else {
                    return Err(ApiError::bad_request(
                        ErrorCode::InvalidLease,
                        format!("lease {} has no reservation {rid}", current.record.id),
                    ));
                };
                let mut params = existing.params.as_object().cloned().unwrap_or_default();
                for (k, v) in params_of(given).as_object().into_iter().flatten() {
                    params.insert(k.clone(), v.clone());
                }
                let resolved = resolve(state, &existing.resource_type, &Value::Object(params)).await?;
                instances::check(state, ctx, std::slice::from_ref(&resolved)).await?;
                changes.push(ReservationUpdate { id: rid, params: resolved.params, demand: resolved.demand });
            }
        }
        Some(_) => return Err(ApiError::bad_request(ErrorCode::InvalidLease, "reservations must be a list")),
    }
    Ok(changes)
}
