//! Reads of quota limits and of usage over time.

use berth_core::time::DateMath;
use std::collections::{BTreeMap, BTreeSet};

use berth_core::quota::{Limits, Scope, LEASES, UNLIMITED};
use berth_core::{timeline, Error, Window};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::client::GenericClient;
use crate::projection::quotas::key;
use crate::{Store, StoreError};

/// Holds over time by (project, user, resource).
pub(crate) type HoldsBy = BTreeMap<(String, String, String), Vec<(Window, i64)>>;

/// One resource in a usage report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceUsage {
    /// The limit in effect; `-1`: unlimited.
    pub limit: i64,
    /// Held now.
    pub in_use: i64,
    /// The most held at any instant of the window.
    pub peak: i64,
    /// The peak is above the limit (after a limit was lowered).
    pub over_limit: bool,
}

/// Usage of the resources held or limited, over a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageReport {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub usage: BTreeMap<String, ResourceUsage>,
}

/// The limits of the levels bearing on `scope` (the defaults alone for the defaults).
pub(crate) async fn limits(c: &impl GenericClient, scope: &Scope) -> Result<Limits, StoreError> {
    let (project, user) = key(scope);
    let rows = c
        .query(
            "SELECT project_id, user_id, resource, hard_limit FROM quota_limits
             WHERE project_id = '' OR (project_id = $1 AND user_id IN ('', $2))",
            &[&project, &user],
        )
        .await?;
    let mut out = Limits::default();
    for r in rows {
        let (p, u): (&str, &str) = (r.get("project_id"), r.get("user_id"));
        let level = match (p.is_empty(), u.is_empty()) {
            (true, _) => &mut out.defaults,
            (false, true) => &mut out.project,
            (false, false) => &mut out.user,
        };
        level.insert(r.get("resource"), r.get("hard_limit"));
    }
    Ok(out)
}

/// Holds over `within` of `resources` (all classes when empty), by
/// (project, user, resource): allocations clipped to `within` and summed; for
/// `leases`, each lease not ended as a hold of 1 up to its end. `project`
/// `None`: every project.
pub(crate) async fn holds(
    c: &impl GenericClient,
    project: Option<&str>,
    user: Option<&str>,
    resources: &[String],
    within: Window,
) -> Result<HoldsBy, StoreError> {
    let classes: Vec<&str> = resources.iter().map(String::as_str).filter(|r| *r != LEASES).collect();
    let all = resources.is_empty();
    let mut out = HoldsBy::new();
    if all || !classes.is_empty() {
        let rows = c
            .query(
                "SELECT c.project_id, c.user_id, a.resource_class, greatest(lower(a.during), $4) AS s,
                        CASE WHEN $5::timestamptz IS NULL THEN upper(a.during)
                             WHEN upper(a.during) IS NULL THEN $5
                             ELSE least(upper(a.during), $5) END AS e,
                        sum(a.used)::int8 AS used
                 FROM consumers c JOIN allocations a ON a.consumer_uuid = c.uuid
                 WHERE ($1::text IS NULL OR c.project_id = $1) AND ($2::text IS NULL OR c.user_id = $2)
                   AND ($3 OR a.resource_class = ANY($6)) AND a.during && tstzrange($4, $5, '[)')
                 GROUP BY 1, 2, 3, 4, 5",
                &[&project, &user, &all, &within.start, &within.end, &classes],
            )
            .await?;
        for r in rows {
            out.entry((r.get("project_id"), r.get("user_id"), r.get("resource_class")))
                .or_default()
                .push((Window { start: r.get("s"), end: r.get("e") }, r.get("used")));
        }
    }
    if all || resources.iter().any(|r| r == LEASES) {
        let rows = c
            .query(
                "SELECT project_id, user_id, end_at, count(*)::int8 AS leases FROM leases
                 WHERE ($1::text IS NULL OR project_id = $1) AND ($2::text IS NULL OR user_id = $2)
                   AND end_at > $3 AND status NOT IN ('TERMINATED', 'TERMINATING')
                 GROUP BY 1, 2, 3",
                &[&project, &user, &within.start],
            )
            .await?;
        for r in rows {
            out.entry((r.get("project_id"), r.get("user_id"), LEASES.to_string()))
                .or_default()
                .push((Window { start: within.start, end: Some(r.get("end_at")) }, r.get("leases")));
        }
    }
    Ok(out)
}

/// The holds of `resource`, users together, by project.
pub(crate) fn by_project(holds: &HoldsBy, resource: &str) -> BTreeMap<String, Vec<(Window, i64)>> {
    let mut out: BTreeMap<String, Vec<(Window, i64)>> = BTreeMap::new();
    for ((p, _, r), h) in holds {
        if r == resource {
            out.entry(p.clone()).or_default().extend(h.iter().copied());
        }
    }
    out
}

/// How far usage goes from `from` on: the peak of the holds.
pub(crate) fn peak_from(holds: &[(Window, i64)], from: DateTime<Utc>) -> i64 {
    timeline::peak(holds, &Window::from(from))
}

impl Store {
    /// The limits set at the levels bearing on `scope`.
    pub async fn quota_limits(&self, scope: &Scope) -> Result<Limits, Error> {
        scope.validate()?;
        let c = self.client().await?;
        Ok(limits(&c, scope).await?)
    }

    /// Usage of a project (or one of its users) over `[start, end)`, per
    /// resource held or limited; `end` defaults to 30 days after `start`.
    pub async fn quota_usage(
        &self,
        project: &str,
        user: Option<&str>,
        start: DateTime<Utc>,
        end: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<UsageReport, Error> {
        let scope = match user {
            Some(u) => Scope::user(project, u),
            None => Scope::project(project),
        };
        scope.validate()?;
        let end = end.unwrap_or(start.saturating_plus(Duration::days(30)));
        let window = Window::new(start, Some(end))?;
        let c = self.client().await?;
        let limits = limits(&c, &scope).await?;
        // From now or the start, whichever is first, so that `in_use` is known.
        let read = Window { start: start.min(now), end: Some(end.max(now.saturating_plus(Duration::microseconds(1)))) };
        let held = holds(&c, Some(project), user, &[], read).await?;
        let effective = if user.is_some() { limits.effective_user() } else { limits.effective_project() };
        let mut resources: BTreeSet<String> = effective.keys().cloned().collect();
        resources.extend(held.keys().map(|k| k.2.clone()));
        let mut usage = BTreeMap::new();
        for resource in resources {
            let h: Vec<(Window, i64)> =
                held.iter().filter(|(k, _)| k.2 == resource).flat_map(|(_, h)| h.iter().copied()).collect();
            let limit = effective.get(&resource).copied().unwrap_or(UNLIMITED);
            let in_use =
                timeline::peak(&h, &Window { start: now, end: Some(now.saturating_plus(Duration::microseconds(1))) });
            let peak = timeline::peak(&h, &window);
            usage.insert(resource, ResourceUsage { limit, in_use, peak, over_limit: limit >= 0 && peak > limit });
        }
        Ok(UsageReport { start, end, usage })
    }
}
