//! Quotas: limits on what a project (and a user within it) may hold at any
//! instant, per resource class, plus `leases` (how many leases it holds that
//! have not ended).
//!
//! Three levels: the defaults, a project, a user within a project. A project
//! without a limit of its own for a resource falls back to the default; a
//! user's usage counts toward the project and must fit both, so a user
//! without a limit of its own is bounded by the project's alone. No limit
//! anywhere, or `-1`, is unlimited.
//!
//! Usage is never counted separately: it is the sum of the holder's
//! allocations, which have windows, so a change is checked over time. At
//! every instant where the change raises the holder's usage (new holds minus
//! the ones they replace: a resize counts only its delta, a move nothing), the
//! usage with the change must be within the limit. Instants where it does not
//! raise usage are never refused, so deleting and shrinking never need quota,
//! and a limit lowered below usage blocks only increases.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode, ErrorKind};
use crate::names::{is_custom_name, STANDARD_RESOURCE_CLASSES};
use crate::window::Window;

/// The resource that counts leases rather than a resource class.
pub const LEASES: &str = "leases";
/// The explicit "no limit".
pub const UNLIMITED: i64 = -1;

/// Whose limits: the defaults (neither set), a project, or a user within one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Scope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

impl Scope {
    pub fn defaults() -> Scope {
        Scope { project_id: None, user_id: None }
    }
    pub fn project(project: impl Into<String>) -> Scope {
        Scope { project_id: Some(project.into()), user_id: None }
    }
    pub fn user(project: impl Into<String>, user: impl Into<String>) -> Scope {
        Scope { project_id: Some(project.into()), user_id: Some(user.into()) }
    }

    /// A user needs its project; ids are not empty.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::invalid(ErrorCode::QuotaInvalid, m));
        match (&self.project_id, &self.user_id) {
            (None, Some(_)) => bad("a user's limits belong to a project"),
            (Some(p), _) if p.trim().is_empty() || p.len() > 255 => bad("the project id must be 1 to 255 characters"),
            (_, Some(u)) if u.trim().is_empty() || u.len() > 255 => bad("the user id must be 1 to 255 characters"),
            _ => Ok(()),
        }
    }

    /// The log stream of this scope's limits.
    pub fn stream(&self) -> String {
        match (&self.project_id, &self.user_id) {
            (None, _) => "quota:defaults".to_string(),
            (Some(p), None) => format!("quota:{p}"),
            (Some(p), Some(u)) => format!("quota:{p}/{u}"),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.project_id, &self.user_id) {
            (None, _) => write!(f, "the defaults"),
            (Some(p), None) => write!(f, "project {p}"),
            (Some(p), Some(u)) => write!(f, "user {u} in project {p}"),
        }
    }
}

/// A resource a limit may name: a standard class, a `CUSTOM_` class, or `leases`.
pub fn check_resource(name: &str) -> Result<(), Error> {
    if name == LEASES || STANDARD_RESOURCE_CLASSES.contains(&name) || is_custom_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(
            ErrorCode::QuotaInvalid,
            format!("{name:?} is not a resource class (standard or CUSTOM_*) nor {LEASES:?}"),
        ))
    }
}

/// A limit is `-1` (unlimited) or a whole number from 0.
pub fn check_limit(name: &str, value: i64) -> Result<(), Error> {
    check_resource(name)?;
    if value < UNLIMITED {
        return Err(Error::invalid(
            ErrorCode::QuotaInvalid,
            format!("the limit of {name} must be -1 (unlimited) or at least 0"),
        ));
    }
    Ok(())
}

/// The limits set at the three levels that bear on one project and one of
/// its users (each level: resource → limit as set, `-1` included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub defaults: BTreeMap<String, i64>,
    pub project: BTreeMap<String, i64>,
    pub user: BTreeMap<String, i64>,
}

/// The level a limit in effect was set at: a user's own, its project's
/// (which a user inherits), or the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    User,
    Project,
    Default,
}

fn bounded(v: Option<i64>) -> Option<i64> {
    v.filter(|l| *l != UNLIMITED)
}

impl Limits {
    /// The project's limit of `resource`: its own, else the default. `None`: unlimited.
    pub fn project_limit(&self, resource: &str) -> Option<i64> {
        bounded(self.project.get(resource).or_else(|| self.defaults.get(resource)).copied())
    }

    /// The user's own limit of `resource`; `None`: only the project's applies.
    pub fn user_limit(&self, resource: &str) -> Option<i64> {
        bounded(self.user.get(resource).copied())
    }

    /// What a project's limits are in effect, resource by resource (`-1` shown as set).
    pub fn effective_project(&self) -> BTreeMap<String, i64> {
        let mut out = self.defaults.clone();
        out.extend(self.project.iter().map(|(k, v)| (k.clone(), *v)));
        out
    }

    /// What bounds a user: its own limits, else the project's in effect.
    pub fn effective_user(&self) -> BTreeMap<String, i64> {
        let mut out = self.effective_project();
        out.extend(self.user.iter().map(|(k, v)| (k.clone(), *v)));
        out
    }

    /// Which level set each of the defaults: all of them.
    pub fn default_sources(&self) -> BTreeMap<String, Source> {
        self.defaults.keys().map(|k| (k.clone(), Source::Default)).collect()
    }

    /// Which level set each limit in [`Limits::effective_project`].
    pub fn project_sources(&self) -> BTreeMap<String, Source> {
        let mut out = self.default_sources();
        out.extend(self.project.keys().map(|k| (k.clone(), Source::Project)));
        out
    }

    /// Which level set each limit in [`Limits::effective_user`].
    pub fn user_sources(&self) -> BTreeMap<String, Source> {
        let mut out = self.project_sources();
        out.extend(self.user.keys().map(|k| (k.clone(), Source::User)));
        out
    }
}

/// The first instant where a change would take usage past a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Excess {
    pub at: DateTime<Utc>,
    /// Usage at that instant without the change.
    pub usage: i64,
    /// What the change adds there.
    pub growth: i64,
}

/// Checks a holder's change over time against `limit`, from `from` on (the
/// past cannot be held any more): `others` are the holder's holds that stay,
/// `previous` the ones replaced, `new` their replacements. At every instant
/// where the change raises usage, usage with the change must be at most the
/// limit. Answers the first instant where it is not.
pub fn excess(
    others: &[(Window, i64)],
    previous: &[(Window, i64)],
    new: &[(Window, i64)],
    limit: i64,
    from: DateTime<Utc>,
) -> Option<Excess> {
    // (time, Δ usage without the change, Δ growth): two step functions swept together.
    let mut points: Vec<(DateTime<Utc>, i64, i64)> = Vec::new();
    let mut add = |w: &Window, base: i64, growth: i64| {
        if w.end.is_some_and(|e| e <= from) {
            return;
        }
        points.push((w.start.max(from), base, growth));
        if let Some(e) = w.end {
            points.push((e, -base, -growth));
        }
    };
    for (w, u) in others {
        add(w, *u, 0);
    }
    for (w, u) in previous {
        add(w, *u, -u);
    }
    for (w, u) in new {
        add(w, 0, *u);
    }
    points.sort_by_key(|p| p.0);
    let (mut usage, mut growth) = (0i64, 0i64);
    let mut i = 0;
    while i < points.len() {
        let at = points[i].0;
        // Everything that changes at this instant, before looking at it:
        // windows are [start, end), so back-to-back holds never add up.
        while i < points.len() && points[i].0 == at {
            usage += points[i].1;
            growth += points[i].2;
            i += 1;
        }
        if growth > 0 && usage + growth > limit {
            return Some(Excess { at, usage, growth });
        }
    }
    None
}

/// The refusal: names the resource, whose limit, the limit, the usage and the request.
pub fn exceeded(
    resource: &str,
    scope: &Scope,
    limit: i64,
    usage: i64,
    requested: i64,
    at: Option<DateTime<Utc>>,
) -> Error {
    let when = at.map(|t| format!(" at {}", t.format("%Y-%m-%dT%H:%M:%SZ"))).unwrap_or_default();
    Error::new(
        ErrorKind::Quota,
        ErrorCode::QuotaExceeded,
        format!("quota exceeded for {resource} of {scope}: limit {limit}, in use {usage}, requested {requested}{when}"),
    )
}

/// A count (leases) raised by `requested`: refused when it would go past the
/// limit (a count already over its limit only blocks increases).
pub fn check_count(
    resource: &str,
    scope: &Scope,
    limit: Option<i64>,
    in_use: i64,
    requested: i64,
) -> Result<(), Error> {
    match limit {
        Some(l) if requested > 0 && in_use + requested > l => {
            Err(exceeded(resource, scope, l, in_use, requested, None))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
    }
    fn w(a: u32, b: u32) -> Window {
        Window::new(t(a), Some(t(b))).unwrap()
    }

    #[test]
    fn limits_fall_back_from_project_to_defaults_and_minus_one_is_unlimited() {
        let l = Limits {
            defaults: BTreeMap::from([("VCPU".into(), 10), ("DISK_GB".into(), 100)]),
            project: BTreeMap::from([("VCPU".into(), 20), ("DISK_GB".into(), -1)]),
            user: BTreeMap::from([("VCPU".into(), 5)]),
        };
        assert_eq!(l.project_limit("VCPU"), Some(20));
        assert_eq!(l.project_limit("DISK_GB"), None);
        assert_eq!(l.project_limit("MEMORY_MB"), None);
        assert_eq!(l.user_limit("VCPU"), Some(5));
        assert_eq!(l.user_limit("DISK_GB"), None);
        assert_eq!(l.effective_user()["VCPU"], 5);
        assert_eq!(l.effective_user()["DISK_GB"], -1);
        let only_defaults = Limits { defaults: l.defaults.clone(), ..Default::default() };
        assert_eq!(only_defaults.project_limit("VCPU"), Some(10));
    }

    #[test]
    fn a_future_hold_is_refused_only_where_it_overlaps() {
        // 8 held 2..4 and 6..8; limit 10.
        let others = vec![(w(2, 4), 8), (w(6, 8), 8)];
        assert_eq!(excess(&others, &[], &[(w(4, 6), 10)], 10, t(0)), None);
        let e = excess(&others, &[], &[(w(3, 5), 3)], 10, t(0)).unwrap();
        assert_eq!(e, Excess { at: t(3), usage: 8, growth: 3 });
        assert!(excess(&others, &[], &[(w(0, 23), 2)], 10, t(0)).is_none());
        assert!(excess(&others, &[], &[(Window::from(t(7)), 3)], 10, t(0)).is_some());
    }

    #[test]
    fn a_resize_counts_only_its_delta_and_a_move_nothing() {
        let others = vec![(w(0, 10), 6)];
        // 2 -> 4 over the same window: +2, total 10.
        assert!(excess(&others, &[(w(0, 10), 2)], &[(w(0, 10), 4)], 10, t(0)).is_none());
        assert!(excess(&others, &[(w(0, 10), 2)], &[(w(0, 10), 5)], 10, t(0)).is_some());
        // A move (two holds elsewhere summing the same) raises nothing.
        assert!(excess(&others, &[(w(0, 10), 4)], &[(w(0, 10), 3), (w(0, 10), 1)], 9, t(0)).is_none());
    }

    #[test]
    fn over_a_lowered_limit_only_increases_are_refused() {
        let others = vec![(w(0, 10), 12)];
        // Shrinking and deleting are fine.
        assert!(excess(&others, &[(w(0, 10), 3)], &[(w(0, 10), 1)], 10, t(0)).is_none());
        assert!(excess(&others, &[(w(0, 10), 3)], &[], 10, t(0)).is_none());
        // Growing is not, even by one.
        assert!(excess(&others, &[], &[(w(5, 6), 1)], 10, t(0)).is_some());
        // Where usage is back under the limit, growth is fine again.
        assert!(excess(&others, &[], &[(w(10, 12), 10)], 10, t(0)).is_none());
        // Shrinking at one time does not pay for growing at another.
        assert!(excess(&[(w(0, 10), 9)], &[(w(0, 5), 2)], &[(w(5, 10), 2)], 10, t(0)).is_some());
    }

    #[test]
    fn back_to_back_holds_do_not_add_up_and_the_past_is_not_checked() {
        assert!(excess(&[(w(0, 2), 10)], &[], &[(w(2, 4), 10)], 10, t(0)).is_none());
        // Over the limit in the past (before `from`) is not this change's business.
        assert!(excess(&[(w(0, 2), 10)], &[], &[(w(1, 4), 5)], 10, t(2)).is_none());
        assert!(excess(&[(w(0, 3), 10)], &[], &[(w(1, 4), 5)], 10, t(2)).is_some());
    }

    #[test]
    fn counts_and_names() {
        let s = Scope::project("p");
        assert!(check_count(LEASES, &s, Some(2), 1, 1).is_ok());
        let e = check_count(LEASES, &s, Some(2), 2, 1).unwrap_err();
        assert_eq!((e.kind, e.code), (ErrorKind::Quota, ErrorCode::QuotaExceeded));
        assert!(e.detail.contains("leases") && e.detail.contains("limit 2") && e.detail.contains("in use 2"));
        assert!(check_count(LEASES, &s, Some(0), 5, 0).is_ok());
        assert!(check_limit("VCPU", -1).is_ok());
        assert!(check_limit("CUSTOM_GPU", 0).is_ok());
        assert!(check_limit("leases", 3).is_ok());
        assert!(check_limit("VCPU", -2).is_err());
        assert!(check_limit("vcpu", 1).is_err());
        assert!(Scope { project_id: None, user_id: Some("u".into()) }.validate().is_err());
        assert!(Scope::project("").validate().is_err());
        assert_eq!(Scope::user("p", "u").to_string(), "user u in project p");
    }
}
