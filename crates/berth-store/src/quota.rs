//! The quota check: the one function every command that raises usage runs
//! inside its own transaction, at READ COMMITTED, before appending.
//!
//! Guarding: a raise locks its projects' rows in `quota_guards` FIRST (before
//! consumers and providers), sorted, whenever any limit bears on the project
//! (its own, its users', or a default). Two raises of one project therefore
//! run one after the other, and the second reads usage after the first has
//! committed. Projects with no limit anywhere take no lock and read nothing.
//! A limit appearing between the lock and the read is caught: the check
//! sees limits for a project it holds no guard of, takes it then and reads
//! again (out of the usual order: a deadlock, if any, restarts the command).
//!
//! Deciding: usage is the project's (and user's) allocations, read from the
//! projection (each allocation carries its consumer's project and user),
//! only those overlapping the windows asked about, clipped and summed in
//! SQL. The consumers being rewritten are read apart: what they hold now is
//! what the change replaces, so a resize counts its delta and a move nothing. berth-core's [`quota::excess`] rules.
//!
//! Lease counts (`leases`): leases of the project (and user) not ended.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::event::Allocation;
use berth_core::quota::{self, Limits, Scope, LEASES};
use berth_core::{Event, Window};
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::lock::{self, Sorted};
use crate::{sql, StoreError};

/// Locks the guards of the projects that any limit bears on (crate::lock).
pub(crate) use crate::lock::guards as lock;

mod allowance;
mod statements;
pub(crate) use allowance::{allowance, Allowance};
use statements::LEASE_COUNTS;
pub(crate) use statements::{LIMITS, USAGE};

pub(crate) type Holds = Vec<(Window, i64)>;

/// What one command asks of the quotas: its new holds by project, user and
/// class; the consumers whose current holds they replace; the leases it makes.
pub(crate) struct Check {
    /// The instant the command decides at: known when made, or only after
    /// the statements that read usage were sent ([`Check::unclocked`]).
    at: Option<DateTime<Utc>>,
    /// The projects whose usage may rise.
    projects: Sorted<String>,
    replaced: Vec<Uuid>,
    holds: BTreeMap<(String, String, String), Holds>,
    leases: BTreeMap<(String, String), i64>,
    // Statement parameters, computed once.
    scope_p: Vec<String>,
    scope_u: Vec<String>,
    key_p: Vec<String>,
    key_c: Vec<String>,
    key_s: Vec<DateTime<Utc>>,
    key_e: Vec<Option<DateTime<Utc>>>,
}

/// The parameters of the statements a caller pipelines itself.
pub(crate) struct Params<'a> {
    /// Of [`lock::GUARD_INSERT`] and [`lock::GUARD_LOCK`].
    pub guard: [&'a (dyn ToSql + Sync); 1],
    pub limits: [&'a (dyn ToSql + Sync); 2],
    pub usage: [&'a (dyn ToSql + Sync); 6],
}

impl Check {
    /// `consumers`: (consumer, project, user, new allocations); `leases`:
    /// leases made, by (project, user); `at`: the instant the command decides at.
    pub(crate) fn new<'a>(
        at: DateTime<Utc>,
        consumers: impl IntoIterator<Item = (Uuid, &'a str, &'a str, &'a [Allocation])>,
        leases: BTreeMap<(String, String), i64>,
    ) -> Check {
        Check::build(Some(at), consumers, leases)
    }

    /// As [`Check::new`], for a command that reads its instant in the same
    /// round trip as the usage (a claim batch): the transaction's start
    /// (`clock::STARTED`), to which [`USAGE`] clips the windows itself.
    /// [`Check::clock`] gives it the instant once read.
    pub(crate) fn unclocked<'a>(
        consumers: impl IntoIterator<Item = (Uuid, &'a str, &'a str, &'a [Allocation])>,
    ) -> Check {
        Check::build(None, consumers, BTreeMap::new())
    }

    /// The instant read for an [`Check::unclocked`] check: the windows asked
    /// about start there, as [`USAGE`] clipped them.
    pub(crate) fn clock(&mut self, at: DateTime<Utc>) {
        self.at = Some(at);
        for s in &mut self.key_s {
            *s = (*s).max(at);
        }
    }

    fn at(&self) -> DateTime<Utc> {
        self.at.expect("a check decides once clocked")
    }

    fn build<'a>(
        at: Option<DateTime<Utc>>,
        consumers: impl IntoIterator<Item = (Uuid, &'a str, &'a str, &'a [Allocation])>,
        leases: BTreeMap<(String, String), i64>,
    ) -> Check {
        let mut replaced = Vec::new();
        let mut holds: BTreeMap<(String, String, String), Holds> = BTreeMap::new();
        for (consumer, project, user, allocations) in consumers {
            replaced.push(consumer);
            for a in allocations {
                holds
                    .entry((project.to_string(), user.to_string(), a.resource_class.clone()))
                    .or_default()
                    .push((a.window, a.used));
            }
        }
        replaced.sort();
        let mut projects: BTreeSet<String> = holds.keys().map(|k| k.0.clone()).collect();
        projects.extend(leases.iter().filter(|(_, n)| **n > 0).map(|(k, _)| k.0.clone()));
        let mut scopes: BTreeSet<(String, String)> = BTreeSet::from([(String::new(), String::new())]);
        for p in &projects {
            scopes.insert((p.clone(), String::new()));
        }
        scopes.extend(holds.keys().map(|k| (k.0.clone(), k.1.clone())));
        scopes.extend(leases.keys().cloned());
        // One usage key per project and class: the span of its new holds from
        // now on (where now is not known yet, USAGE clips it).
        let mut spans: BTreeMap<(String, String), Window> = BTreeMap::new();
        for ((p, _, c), hs) in &holds {
            for (w, _) in hs {
                if at.is_some_and(|at| w.end.is_some_and(|e| e <= at)) {
                    continue;
                }
                let w = Window { start: at.map_or(w.start, |at| w.start.max(at)), end: w.end };
                spans
                    .entry((p.clone(), c.clone()))
                    .and_modify(|s| {
                        s.start = s.start.min(w.start);
                        s.end = s.end.zip(w.end).map(|(a, b)| a.max(b));
                    })
                    .or_insert(w);
            }
        }
        let mut check = Check {
            at,
            projects: projects.into_iter().collect(),
            replaced,
            holds,
            leases,
            scope_p: scopes.iter().map(|s| s.0.clone()).collect(),
            scope_u: scopes.iter().map(|s| s.1.clone()).collect(),
            key_p: Vec::new(),
            key_c: Vec::new(),
            key_s: Vec::new(),
            key_e: Vec::new(),
        };
        for ((p, c), w) in spans {
            check.key_p.push(p);
            check.key_c.push(c);
            check.key_s.push(w.start);
            check.key_e.push(w.end);
        }
        check
    }

    /// From the events a command is about to record: every consumer whose
    /// allocations they replace (emptied ones too) and every lease they make
    /// or bring into a project.
    pub(crate) fn for_events(at: DateTime<Utc>, events: &[Event]) -> Check {
        let mut leases: BTreeMap<(String, String), i64> = BTreeMap::new();
        for e in events {
            // A lease a project gains: made, split off, or handed over.
            let gained = match e {
                Event::LeaseCreated { lease, .. } | Event::LeaseSplit { lease, .. } => {
                    Some((&lease.project_id, &lease.user_id))
                }
                Event::LeaseTransferred { to_project, user_id, .. } => Some((to_project, user_id)),
                _ => None,
            };
            if let Some((project, user)) = gained {
                *leases.entry((project.clone(), user.clone())).or_default() += 1;
            }
        }
        let consumers = events.iter().filter_map(|e| match e {
            Event::AllocationsReplaced { consumer, project_id, user_id, allocations, .. } => {
                Some((*consumer, project_id.as_str(), user_id.as_str(), allocations.as_slice()))
            }
            _ => None,
        });
        Check::new(at, consumers, leases)
    }

    /// Usage rows by (project, class), from the rows of [`USAGE`].
    fn usage(&self, rows: &[Row]) -> Usage {
        let mut out: BTreeMap<(String, String), Vec<UsageRow>> = BTreeMap::new();
        // Open-ended holds that began before the window, by (project, class, user).
        let mut before: BTreeMap<(String, String, String), i64> = BTreeMap::new();
        let own = |c: Option<Uuid>| c.filter(|c| self.replaced.binary_search(c).is_ok());
        for r in rows {
            let (project, user, class): (String, String, String) =
                (r.get("project_id"), r.get("user_id"), r.get("resource_class"));
            let used: i64 = r.get("used");
            let consumer: Option<Uuid> = r.get("consumer");
            match r.get::<_, i32>("kind") {
                0 => {
                    let w = Window { start: r.get("start_at"), end: r.get("end_at") };
                    out.entry((project, class)).or_default().push((user, w, used, consumer));
                }
                1 => {
                    *before.entry((project.clone(), class.clone(), user.clone())).or_default() -= used;
                    let w = Window { start: r.get("start_at"), end: None };
                    out.entry((project, class)).or_default().push((user, w, used, own(consumer)));
                }
                2 => *before.entry((project, class, user)).or_default() += used,
                _ => {
                    *before.entry((project.clone(), class.clone(), user.clone())).or_default() -= used;
                    let w = self.window_of(&project, &class);
                    out.entry((project, class)).or_default().push((user, w, used, consumer));
                }
            }
        }
        for ((project, class, user), used) in before {
            if used > 0 {
                let w = self.window_of(&project, &class);
                out.entry((project, class)).or_default().push((user, w, used, None));
            }
        }
        Usage { rows: out }
    }

    /// The window asked about for a project and class.
    fn window_of(&self, project: &str, class: &str) -> Window {
        let i = self
            .key_p
            .iter()
            .zip(&self.key_c)
            .position(|(p, c)| p == project && c == class)
            .expect("usage is read only for the keys asked about");
        Window { start: self.key_s[i], end: self.key_e[i] }
    }

    pub(crate) fn params(&self) -> Params<'_> {
        Params {
            guard: [self.projects.param()],
            limits: [&self.scope_p, &self.scope_u],
            usage: [&self.key_p, &self.key_c, &self.key_s, &self.key_e, &self.replaced, &self.at],
        }
    }

    /// The scopes whose limits bear on leases of `project` made by `user`
    /// (the defaults, the project's, the user's), as [`LIMITS`]' parameters:
    /// those of a check of such leases and their slots, known before the
    /// leases are placed, so that a command may read the limits in an earlier
    /// round trip ([`Check::run_on_limits`]).
    pub(crate) fn lease_scopes(project: &str, user: &str) -> [Vec<String>; 2] {
        let scopes = BTreeSet::from([
            (String::new(), String::new()),
            (project.to_string(), String::new()),
            (project.to_string(), user.to_string()),
        ]);
        [scopes.iter().map(|s| s.0.clone()).collect(), scopes.iter().map(|s| s.1.clone()).collect()]
    }

    /// As [`Check::run`], on the rows of [`LIMITS`] read with `scopes` after
    /// the guards were locked: when they are this check's scopes and no limit
    /// bears on them, nothing more is read (most projects have none); else
    /// limits and usage are read again and decided on, as [`Check::run`] does.
    pub(crate) async fn run_on_limits(
        &self,
        tx: &impl GenericClient,
        guards: &[Row],
        scopes: &[Vec<String>; 2],
        limit_rows: &[Row],
    ) -> Result<(), StoreError> {
        if limit_rows.is_empty() && scopes[0] == self.scope_p && scopes[1] == self.scope_u {
            return Ok(());
        }
        self.run(tx, guards).await
    }

    /// Reads limits and usage and decides, after [`Check::lock`].
    pub(crate) async fn run(&self, tx: &impl GenericClient, guards: &[Row]) -> Result<(), StoreError> {
        let p = self.params();
        let [limits, usage] = sql::pipeline(tx, [(LIMITS, &p.limits[..]), (USAGE, &p.usage[..])]).await?;
        self.decide(tx, guards, limits, usage).await
    }

    /// Decides on the rows of [`lock::GUARD_LOCK`], [`LIMITS`] and [`USAGE`] read
    /// in that order in the command's transaction: the whole command as one.
    pub(crate) async fn decide(
        &self,
        tx: &impl GenericClient,
        guards: &[Row],
        limit_rows: Vec<Row>,
        usage_rows: Vec<Row>,
    ) -> Result<(), StoreError> {
        let Some(limited) = self.limits(tx, guards, limit_rows, usage_rows).await? else {
            return Ok(());
        };
        limited.check(&self.holds, &self.replaced, &[])?;
        if self.leases.values().any(|n| *n > 0) {
            let counts = lease_counts(tx, &self.projects, self.at()).await?;
            for ((project, user), n) in &self.leases {
                let limits = limited.levels.of(project, user);
                let in_project: i64 = counts.iter().filter(|(k, _)| k.0 == *project).map(|(_, c)| c).sum();
                let made: i64 = self.leases.iter().filter(|(k, _)| k.0 == *project).map(|(_, c)| c).sum();
                quota::check_count(LEASES, &Scope::project(project), limits.project_limit(LEASES), in_project, made)?;
                let mine = counts.get(&(project.clone(), user.clone())).copied().unwrap_or(0);
                quota::check_count(LEASES, &Scope::user(project, user), limits.user_limit(LEASES), mine, *n)?;
            }
        }
        Ok(())
    }

    /// The limits and usage that bear on this check, from the rows of
    /// [`lock::GUARD_LOCK`], [`LIMITS`] and [`USAGE`]; `None` when no limit does.
    /// A limit that appeared after the guards were locked is guarded now and
    /// everything read again.
    pub(crate) async fn limits(
        &self,
        tx: &impl GenericClient,
        guards: &[Row],
        mut limit_rows: Vec<Row>,
        mut usage_rows: Vec<Row>,
    ) -> Result<Option<Limited>, StoreError> {
        if self.projects.is_empty() {
            return Ok(None);
        }
        let held: BTreeSet<String> = guards.iter().map(|r| r.get("project_id")).collect();
        let limited = |rows: &[Row]| -> BTreeSet<String> {
            let any_default = rows.iter().any(|r| r.get::<_, &str>("project_id").is_empty());
            self.projects
                .iter()
                .filter(|p| any_default || rows.iter().any(|r| r.get::<_, &str>("project_id") == p.as_str()))
                .cloned()
                .collect()
        };
        let unguarded: Vec<String> = limited(&limit_rows).difference(&held).cloned().collect();
        if !unguarded.is_empty() {
            lock::all_guards(tx, &unguarded).await?;
            let p = self.params();
            [limit_rows, usage_rows] = sql::pipeline(tx, [(LIMITS, &p.limits[..]), (USAGE, &p.usage[..])]).await?;
        }
        if limit_rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(Limited { at: self.at(), levels: LevelLimits::from_rows(&limit_rows), usage: self.usage(&usage_rows) }))
    }
}

/// A consumer whose new holds an earlier request of the same batch wrote:
/// they stand in for what it held before.
pub(crate) struct Accepted<'a> {
    pub consumer: Uuid,
    pub project: &'a str,
    pub user: &'a str,
    pub allocations: &'a [Allocation],
}

/// The limits and usage read for a check, to decide one request or several
/// in turn.
pub(crate) struct Limited {
    at: DateTime<Utc>,
    levels: LevelLimits,
    usage: Usage,
}

impl Limited {
    /// Whether `holds` (new holds by project, user and class) fit every
    /// limit bearing on them. `replaced`: the consumers they replace; the
    /// `accepted` consumers hold their new holds instead of what was read.
    pub(crate) fn check(
        &self,
        holds: &BTreeMap<(String, String, String), Holds>,
        replaced: &[Uuid],
        accepted: &[Accepted<'_>],
    ) -> Result<(), berth_core::Error> {
        // Each project and class as a whole, then each user within it.
        let mut levels_asked: BTreeSet<(Scope, &str)> = BTreeSet::new();
        for (project, user, class) in holds.keys() {
            levels_asked.insert((Scope::project(project), class));
            levels_asked.insert((Scope::user(project, user), class));
        }
        for (scope, class) in levels_asked {
            let project = scope.project_id.as_deref().expect("a project");
            let user = scope.user_id.as_deref();
            let limit = match user {
                None => self.levels.of(project, "").project_limit(class),
                Some(u) => self.levels.of(project, u).user_limit(class),
            };
            let Some(limit) = limit else { continue };
            let mine = |u: &str| user.is_none_or(|x| x == u);
            let (mut others, mut previous) = (Vec::new(), Vec::new());
            for (u, w, used, own) in
                self.usage.rows.get(&(project.to_string(), class.to_string())).into_iter().flatten()
            {
                if !mine(u) {
                    continue;
                }
                match own {
                    Some(c) if replaced.contains(c) => previous.push((*w, *used)),
                    Some(c) if accepted.iter().any(|a| a.consumer == *c) => {}
                    _ => others.push((*w, *used)),
                }
            }
            for a in accepted.iter().filter(|a| a.project == project && mine(a.user)) {
                others.extend(a.allocations.iter().filter(|x| x.resource_class == class).map(|x| (x.window, x.used)));
            }
            let new: Holds = holds
                .iter()
                .filter(|((p, u, c), _)| p == project && c == class && mine(u))
                .flat_map(|(_, h)| h.iter().copied())
                .collect();
            if let Some(x) = quota::excess(&others, &previous, &new, limit, self.at) {
                return Err(quota::exceeded(class, &scope, limit, x.usage, x.growth, Some(x.at)));
            }
        }
        Ok(())
    }
}

/// The limit rows read, by level.
struct LevelLimits {
    rows: BTreeMap<(String, String), BTreeMap<String, i64>>,
}

impl LevelLimits {
    fn from_rows(rows: &[Row]) -> LevelLimits {
        let mut out: BTreeMap<(String, String), BTreeMap<String, i64>> = BTreeMap::new();
        for r in rows {
            out.entry((r.get("project_id"), r.get("user_id")))
                .or_default()
                .insert(r.get("resource"), r.get("hard_limit"));
        }
        LevelLimits { rows: out }
    }

    fn of(&self, project: &str, user: &str) -> Limits {
        let get = |p: &str, u: &str| self.rows.get(&(p.to_string(), u.to_string())).cloned().unwrap_or_default();
        Limits { defaults: get("", ""), project: get(project, ""), user: get(project, user) }
    }
}

/// A usage row: user, clipped window, amount, the consumer being rewritten
/// that holds it (none: everyone else's).
type UsageRow = (String, Window, i64, Option<Uuid>);

/// Usage rows read, by (project, class).
struct Usage {
    rows: BTreeMap<(String, String), Vec<UsageRow>>,
}

async fn lease_counts(
    tx: &impl GenericClient,
    projects: &[String],
    at: DateTime<Utc>,
) -> Result<BTreeMap<(String, String), i64>, StoreError> {
    Ok(sql::query(tx, LEASE_COUNTS, &[&projects, &at])
        .await?
        .iter()
        .map(|r| ((r.get("project_id"), r.get("user_id")), r.get("leases")))
        .collect())
}
