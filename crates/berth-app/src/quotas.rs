//! Quotas: the limits at the defaults, per project and per user within a
//! project, changing them (reporting the scopes a change leaves over a
//! limit), and usage over a window on the database's clock.

use std::collections::BTreeMap;

use berth_core::dates::{parse_date, DateSpec};
use berth_core::error::ErrorCode;
pub use berth_core::quota::{Scope, Source};
pub use berth_store::commands::OverLimit;
pub use berth_store::queries::quotas::UsageReport;
use chrono::{DateTime, Utc};

use crate::{Allowed, App, Caller, Error, Owner, Rule};

/// The quota use cases, over one [`App`].
pub struct Quotas<'a> {
    app: &'a App,
}

/// The limits in effect at a scope (-1: unlimited), the level that set
/// each (`user`, `project`, `default`), and the scopes a change left over
/// a limit.
pub struct Limits {
    pub quotas: BTreeMap<String, i64>,
    pub sources: BTreeMap<String, Source>,
    pub over_limit: Vec<OverLimit>,
}

/// Whose a quota rule is asked about: the project (and user) of the
/// scope; the defaults are the caller's own project's.
fn owner<'a>(caller: &'a Caller<'_>, scope: &'a Scope) -> Owner<'a> {
    match (&scope.project_id, &scope.user_id) {
        (None, _) => Owner::Project(caller.project_id),
        (Some(p), None) => Owner::Project(p),
        (Some(p), Some(u)) => Owner::Owned { project: p, user: u },
    }
}

impl Quotas<'_> {
    /// The limits in effect at `scope`.
    pub async fn show(&self, caller: &Caller<'_>, scope: &Scope) -> Result<Limits, Error> {
        caller.authorize(Rule::QuotasGet, owner(caller, scope))?;
        self.limits(scope, Vec::new()).await
    }

    /// Whether the caller may set limits at `scope` (asked before the body is read).
    pub fn may_set(&self, caller: &Caller<'_>, scope: &Scope) -> Result<Allowed, Error> {
        caller.authorize(Rule::QuotasSet, owner(caller, scope))?;
        Ok(Allowed(Rule::QuotasSet))
    }

    /// Sets the limits `set` and removes those in `unset` at `scope`.
    pub async fn set(
        &self,
        caller: &Caller<'_>,
        a: Allowed,
        scope: Scope,
        (set, unset): (BTreeMap<String, i64>, Vec<String>),
    ) -> Result<Limits, Error> {
        debug_assert_eq!(a.0, Rule::QuotasSet);
        let store = &self.app.store;
        let mut over = Vec::new();
        if !unset.is_empty() {
            over = store.unset_quota(&caller.meta(None), scope.clone(), unset).await?;
        }
        if !set.is_empty() {
            over.extend(store.set_quota(&caller.meta(None), scope.clone(), set).await?);
        }
        self.limits(&scope, over).await
    }

    /// Removes every limit at `scope` (back to the defaults).
    pub async fn unset(&self, caller: &Caller<'_>, scope: Scope) -> Result<Limits, Error> {
        caller.authorize(Rule::QuotasDelete, owner(caller, &scope))?;
        let over = self.app.store.unset_quota(&caller.meta(None), scope.clone(), Vec::new()).await?;
        self.limits(&scope, over).await
    }

    /// Limit, in use and peak per resource of `project` (or one of its
    /// users) from `start` (default now) until `end` (default open).
    pub async fn usage(
        &self,
        caller: &Caller<'_>,
        (project, user): (&str, Option<&str>),
        (start, end): (Option<&str>, Option<&str>),
    ) -> Result<UsageReport, Error> {
        let who = match user {
            None => Owner::Project(project),
            Some(user) => Owner::Owned { project, user },
        };
        caller.authorize(Rule::QuotasUsage, who)?;
        let now = self.app.store.now().await?;
        let date = |key: &str, v: Option<&str>| -> Result<Option<DateTime<Utc>>, Error> {
            Ok(match v.map(|s| parse_date(key, s)).transpose()? {
                None => None,
                Some(DateSpec::Now) => Some(now),
                Some(DateSpec::At(t)) => Some(t),
            })
        };
        let start = date("start", start)?.unwrap_or(now);
        let end = date("end", end)?;
        if end.is_some_and(|e| e <= start) {
            return Err(berth_core::Error::invalid(ErrorCode::QuotaInvalid, "end must be after start").into());
        }
        Ok(self.app.store.quota_usage(project, user, start, end, now).await?)
    }

    async fn limits(&self, scope: &Scope, over_limit: Vec<OverLimit>) -> Result<Limits, Error> {
        let limits = self.app.store.quota_limits(scope).await?;
        let (quotas, sources) = match (&scope.project_id, &scope.user_id) {
            (None, _) => (limits.defaults.clone(), limits.default_sources()),
            (Some(_), None) => (limits.effective_project(), limits.project_sources()),
            (Some(_), Some(_)) => (limits.effective_user(), limits.user_sources()),
        };
        Ok(Limits { quotas, sources, over_limit })
    }
}

impl App {
    /// The quota use cases.
    pub fn quotas(&self) -> Quotas<'_> {
        Quotas { app: self }
    }
}
