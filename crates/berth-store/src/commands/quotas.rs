//! Setting and removing quota limits. A limit may be set below what is held
//! already: the change is accepted, each scope left over its limit is
//! reported and recorded as a `QuotaOverLimit` event, and nothing is taken
//! away (the check refuses increases until usage is back under the limit).

use std::collections::BTreeMap;

use berth_core::quota::{self, Scope, LEASES};
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde::Serialize;

use super::{now, record};
use crate::queries::quotas::{by_project, holds, limits, peak_from};
use crate::{Store, StoreError};

/// A scope left over one of its limits by a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverLimit {
    pub scope: Scope,
    pub resource: String,
    pub limit: i64,
    /// The peak held from the change on (leases: those not ended).
    pub usage: i64,
}

impl Store {
    /// Sets the limits named at `scope`; the others stay as they are.
    /// Answers the scopes this leaves over a limit.
    pub async fn set_quota(
        &self,
        meta: &EventMeta,
        scope: Scope,
        limits: BTreeMap<String, i64>,
    ) -> Result<Vec<OverLimit>, Error> {
        scope.validate()?;
        for (resource, value) in &limits {
            quota::check_limit(resource, *value)?;
        }
        if limits.is_empty() {
            return Ok(Vec::new());
        }
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            guard(tx, &scope).await?;
            let resources: Vec<String> = limits.keys().cloned().collect();
            record(tx, meta, &[Event::QuotaSet { scope: scope.clone(), limits: limits.clone(), at }]).await?;
            over_limits(tx, meta, &scope, &resources, at).await
        })
    }

    /// Removes the limits named at `scope` (all of them when `resources` is
    /// empty): they fall back to the level above. Answers the scopes this
    /// leaves over a limit (a default lower than the project's own was).
    pub async fn unset_quota(
        &self,
        meta: &EventMeta,
        scope: Scope,
        resources: Vec<String>,
    ) -> Result<Vec<OverLimit>, Error> {
        scope.validate()?;
        for resource in &resources {
            quota::check_resource(resource)?;
        }
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            guard(tx, &scope).await?;
            let current = limits(tx, &scope).await?;
            let level = match (&scope.project_id, &scope.user_id) {
                (None, _) => &current.defaults,
                (Some(_), None) => &current.project,
                (Some(_), Some(_)) => &current.user,
            };
            let removed: Vec<String> = if resources.is_empty() {
                level.keys().cloned().collect()
            } else {
                resources.iter().filter(|r| level.contains_key(*r)).cloned().collect()
            };
            if removed.is_empty() {
                return Ok(Vec::new());
            }
            record(tx, meta, &[Event::QuotaUnset { scope: scope.clone(), resources: removed.clone(), at }]).await?;
            over_limits(tx, meta, &scope, &removed, at).await
        })
    }
}

/// A project's (or user's) limits change only after the raises of the
/// project in flight have committed, so the report below sees them. A change
/// of the defaults locks no project: a raise deciding concurrently on the old
/// defaults is ordered before it.
async fn guard(tx: &Transaction<'_>, scope: &Scope) -> Result<(), StoreError> {
    if let Some(p) = &scope.project_id {
        crate::lock::all_guards(tx, std::slice::from_ref(p)).await?;
    }
    Ok(())
}

/// After a change at `scope` of `resources`: every scope it governs whose
/// usage from now on exceeds its limit in effect, recorded.
async fn over_limits(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    scope: &Scope,
    resources: &[String],
    at: DateTime<Utc>,
) -> Result<Vec<OverLimit>, StoreError> {
    let from = Window::from(at);
    let mut over = Vec::new();
    match (&scope.project_id, &scope.user_id) {
        (Some(p), user) => {
            let limits = limits(tx, scope).await?;
            let held = holds(tx, Some(p), user.as_deref(), resources, from).await?;
            for resource in resources {
                let limit = match user {
                    Some(_) => limits.user_limit(resource),
                    None => limits.project_limit(resource),
                };
                let Some(limit) = limit else { continue };
                let h: Vec<(Window, i64)> = by_project(&held, resource).remove(p.as_str()).unwrap_or_default();
                let usage = usage_of(resource, &h, at);
                if usage > limit {
                    over.push(OverLimit { scope: scope.clone(), resource: resource.clone(), limit, usage });
                }
            }
        }
        (None, _) => {
            // Every project that falls back to the default of a resource.
            let defaults = limits(tx, scope).await?.defaults;
            let held = holds(tx, None, None, resources, from).await?;
            for resource in resources {
                let Some(limit) = defaults.get(resource).copied().filter(|l| *l >= 0) else { continue };
                for (project, h) in by_project(&held, resource) {
                    let own = limits(tx, &Scope::project(&project)).await?;
                    if own.project_limit(resource) != Some(limit) {
                        continue;
                    }
                    let usage = usage_of(resource, &h, at);
                    if usage > limit {
                        over.push(OverLimit {
                            scope: Scope::project(project),
                            resource: resource.clone(),
                            limit,
                            usage,
                        });
                    }
                }
            }
        }
    }
    let events: Vec<Event> = over
        .iter()
        .map(|o| Event::QuotaOverLimit {
            scope: o.scope.clone(),
            resource: o.resource.clone(),
            limit: o.limit,
            usage: o.usage,
            at,
        })
        .collect();
    if !events.is_empty() {
        record(tx, meta, &events).await?;
    }
    Ok(over)
}

/// Usage from `at` on: the peak of the holds; for leases, how many have not ended.
fn usage_of(resource: &str, holds: &[(Window, i64)], at: DateTime<Utc>) -> i64 {
    if resource == LEASES {
        holds.iter().filter(|(w, _)| w.end.is_none_or(|e| e > at)).map(|(_, n)| n).sum()
    } else {
        peak_from(holds, at)
    }
}
