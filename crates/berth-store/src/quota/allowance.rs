//! What the quotas allow a new lease, read without locking: offers
//! (`crate::offers`) keep within it, and the command that books one checks
//! again under its guard.

use std::collections::BTreeMap;

use berth_core::event::Allocation;
use berth_core::quota::{self, Scope, LEASES};
use berth_core::Window;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{lease_counts, Check, LevelLimits, Limited, LIMITS, USAGE};
use crate::client::GenericClient;
use crate::{sql, StoreError};

/// What the quotas allow a new lease of a project's user, read without
/// locking anything (offers: `queries::offers`).
pub(crate) enum Allowance {
    /// No limit bears on the lease.
    Unlimited,
    /// These limits and usage do: a placement is checked with [`Limited::check`].
    Limited(Limited),
    /// One more lease is past a `leases` limit: nothing may be booked.
    NoLease,
}

/// The limits bearing on a new lease of `project` by `user` holding any of
/// `classes` within `span`, and the usage they bear on, as a command would
/// read them after its guard, but without the guard: advice decides nothing
/// and the command booking it checks again under its locks.
pub(crate) async fn allowance(
    tx: &impl GenericClient,
    project: &str,
    user: &str,
    classes: &[String],
    span: Window,
    at: DateTime<Utc>,
) -> Result<Allowance, StoreError> {
    let spans: Vec<Allocation> = classes
        .iter()
        .map(|c| Allocation { provider: Uuid::nil(), resource_class: c.clone(), used: 0, window: span })
        .collect();
    let leases = BTreeMap::from([((project.to_string(), user.to_string()), 1)]);
    let check = Check::new(at, [(Uuid::nil(), project, user, spans.as_slice())], leases);
    let p = check.params();
    let [limit_rows, usage_rows] = sql::pipeline(tx, [(LIMITS, &p.limits[..]), (USAGE, &p.usage[..])]).await?;
    if limit_rows.is_empty() {
        return Ok(Allowance::Unlimited);
    }
    let levels = LevelLimits::from_rows(&limit_rows);
    let limits = levels.of(project, user);
    let counts = lease_counts(tx, &check.projects, at).await?;
    let in_project: i64 = counts.iter().filter(|(k, _)| k.0 == project).map(|(_, c)| c).sum();
    let mine = counts.get(&(project.to_string(), user.to_string())).copied().unwrap_or(0);
    let counted = quota::check_count(LEASES, &Scope::project(project), limits.project_limit(LEASES), in_project, 1)
        .and_then(|()| quota::check_count(LEASES, &Scope::user(project, user), limits.user_limit(LEASES), mine, 1));
    if counted.is_err() {
        return Ok(Allowance::NoLease);
    }
    let usage = check.usage(&usage_rows);
    Ok(Allowance::Limited(Limited { at, levels, usage }))
}
