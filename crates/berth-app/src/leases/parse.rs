//! Reading a lease's dates, relative moves, reservations and their
//! parameters (checked by their plugins).

use berth_core::dates::{duration_from_json, parse_date, DateSpec};
use berth_core::error::Error;
use berth_core::lease;
use berth_core::time::DateMath;
use berth_plugins::Registry;
use berth_store::commands::{NewReservation, ReservationUpdate};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::request::{NewReservation as Asked, ReservationChange};
use super::{instances, invalid, Lease};
use crate::{App, Caller};

/// A date the body gives as `key`, if it gives one.
pub(super) fn date_field(key: &str, given: Option<&str>) -> Result<Option<DateSpec>, Error> {
    given.map(|s| parse_date(key, s)).transpose()
}

/// An absolute date, `now` being the database's time of the request.
pub(super) fn fixed_date(key: &str, given: Option<&str>, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, Error> {
    match date_field(key, given)? {
        Some(DateSpec::Now) => Ok(Some(now)),
        Some(DateSpec::At(t)) => Ok(Some(t)),
        None => Ok(None),
    }
}

/// The reservation's parameters as kept: everything but its type and id.
fn params_of(mut params: Map<String, Value>) -> Value {
    params.remove("id");
    Value::Object(params)
}

async fn resolve(plugins: &Registry, resource_type: &str, params: &Value) -> Result<NewReservation, Error> {
    let plugin = plugins.get(resource_type)?;
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

/// The reservations a body asks for, each checked by its plugin.
pub(super) async fn reservations(plugins: &Registry, list: Vec<Asked>) -> Result<Vec<NewReservation>, crate::Error> {
    if list.len() > lease::MAX_RESERVATIONS {
        return Err(invalid(format!("a lease carries at most {} reservations", lease::MAX_RESERVATIONS)));
    }
    let mut out = Vec::new();
    for r in list {
        out.push(resolve(plugins, &r.resource_type, &params_of(r.params)).await?);
    }
    Ok(out)
}

/// A relative move of `field` from `base`: by the first of `moves` (the
/// later one), or back by the second, not both.
pub(super) fn shifted(
    field: &str,
    moves: [(&str, &Option<Value>); 2],
    base: DateTime<Utc>,
) -> Result<Option<DateSpec>, crate::Error> {
    let [(plus, p), (minus, m)] = moves;
    let d = |k: &str, given: &Option<Value>| given.as_ref().map(|g| duration_from_json(k, g)).transpose();
    match (d(plus, p)?, d(minus, m)?) {
        (Some(_), Some(_)) => Err(invalid(format!("{plus} and {minus} cannot be given together"))),
        (Some(p), None) => Ok(Some(DateSpec::At(base.plus(field, p)?))),
        (None, Some(m)) => Ok(Some(DateSpec::At(base.minus(field, m)?))),
        (None, None) => Ok(None),
    }
}

/// The changes asked of the lease's reservations: each names one by id
/// and the parameters to change; the result is checked as a new one is.
pub(super) async fn reservation_changes(
    app: &App,
    caller: &Caller<'_>,
    current: &Lease,
    given: Vec<ReservationChange>,
) -> Result<Vec<ReservationUpdate>, crate::Error> {
    let mut changes = Vec::new();
    for change in given {
        let rid = change.id;
        let Some(existing) = current.record.reservations.iter().find(|x| x.id == rid) else {
            return Err(invalid(format!("lease {} has no reservation {rid}", current.record.id)));
        };
        let mut params = existing.params.as_object().cloned().unwrap_or_default();
        if let Value::Object(asked) = params_of(change.params) {
            params.extend(asked);
        }
        let resolved = resolve(&app.plugins, &existing.resource_type, &Value::Object(params)).await?;
        instances::check(app, caller, std::slice::from_ref(&resolved)).await?;
        changes.push(ReservationUpdate { id: rid, params: resolved.params, demand: resolved.demand });
    }
    Ok(changes)
}
