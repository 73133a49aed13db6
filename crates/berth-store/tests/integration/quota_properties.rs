//! Invariant 2 as a property: random sequences of claims, resizes, moves,
//! deletes and limit changes (at the defaults, a project and a user) on the
//! real store. After each change:
//! - the store holds what a plain model of the rules says it should: a
//!   change is refused for quota exactly when, at some instant where it
//!   raises the usage of a project (or user), that usage would pass the limit
//!   in effect, and written whole otherwise;
//! - no project's or user's usage passed, at any instant the change raised
//!   it, a limit set before the change.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::BTreeMap;

use berth_core::error::ErrorKind;
use berth_core::event::Allocation;
use berth_core::quota::Scope;
use berth_core::Window;
use berth_store::commands::{ConsumerAllocations, GenerationCheck};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Duration, DurationRound, Utc};
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use uuid::Uuid;

const PROJECTS: usize = 2;
const USERS: usize = 2;
const CONSUMERS: usize = 5;
/// Hours looked at; every window starts before HORIZON - 10.
const HORIZON: i64 = 40;

#[derive(Debug, Clone)]
struct Hold {
    provider: usize,
    used: i64,
    start: i64,
    /// `None`: open-ended.
    end: Option<i64>,
}

#[derive(Debug, Clone)]
enum Op {
    /// Replace a consumer's holds (a new claim, a resize, a move, or a change
    /// of project or user, depending on what it held).
    Put {
        consumer: usize,
        project: usize,
        user: usize,
        holds: Vec<Hold>,
    },
    /// Change only the amounts of what it holds (a resize).
    Resize {
        consumer: usize,
        delta: i64,
    },
    /// The same holds on the other provider (a move).
    Move {
        consumer: usize,
    },
    Delete {
        consumer: usize,
    },
    /// Set (`Some`) or remove a limit of VCPU: at the defaults (`project`
    /// None), a project, or a user within it.
    Limit {
        project: Option<usize>,
        user: Option<usize>,
        value: Option<i64>,
    },
}

fn hold() -> impl Strategy<Value = Hold> {
    (0..2usize, 1..5i64, 0..(HORIZON - 10), prop::option::weighted(0.85, 1..10i64))
        .prop_map(|(provider, used, start, len)| Hold { provider, used, start, end: len.map(|l| start + l) })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..CONSUMERS, 0..PROJECTS, 0..USERS, prop::collection::vec(hold(), 1..3))
            .prop_map(|(consumer, project, user, holds)| Op::Put { consumer, project, user, holds }),
        2 => (0..CONSUMERS, -2..4i64).prop_map(|(consumer, delta)| Op::Resize { consumer, delta }),
        1 => (0..CONSUMERS).prop_map(|consumer| Op::Move { consumer }),
        1 => (0..CONSUMERS).prop_map(|consumer| Op::Delete { consumer }),
        2 => (prop::option::weighted(0.8, 0..PROJECTS), 0..USERS, any::<bool>(),
              prop::option::weighted(0.85, -1..14i64))
            .prop_map(|(project, user, at_user, value)| Op::Limit {
                project,
                user: (at_user && project.is_some()).then_some(user),
                value,
            }),
    ]
}

/// What the model holds: each consumer's (project, user, holds).
#[derive(Debug, Clone, Default)]
struct Model {
    consumers: BTreeMap<usize, (usize, usize, Vec<Hold>)>,
    /// (project, user) with None for "all" → VCPU limit as set.
    limits: BTreeMap<(Option<usize>, Option<usize>), i64>,
}

impl Model {
    /// Usage per hour of a project (and, when given, one user).
    fn usage(&self, project: usize, user: Option<usize>) -> Vec<i64> {
        let mut u = vec![0; HORIZON as usize];
        for (p, us, holds) in self.consumers.values() {
            if *p != project || user.is_some_and(|x| x != *us) {
                continue;
            }
            for h in holds {
                for (t, slot) in u.iter_mut().enumerate() {
                    let t = t as i64;
                    if h.start <= t && h.end.is_none_or(|e| t < e) {
                        *slot += h.used;
                    }
                }
            }
        }
        u
    }

    fn project_limit(&self, p: usize) -> Option<i64> {
        self.limits.get(&(Some(p), None)).or_else(|| self.limits.get(&(None, None))).copied().filter(|l| *l >= 0)
    }

    fn user_limit(&self, p: usize, u: usize) -> Option<i64> {
        self.limits.get(&(Some(p), Some(u))).copied().filter(|l| *l >= 0)
    }

    /// Whether `next` (the model after a holdings change) is allowed from
    /// `self`: at every hour where a scope's usage rises, it stays within
    /// the scope's limit.
    fn allows(&self, next: &Model) -> bool {
        for p in 0..PROJECTS {
            let scopes = std::iter::once((None, self.project_limit(p)))
                .chain((0..USERS).map(|u| (Some(u), self.user_limit(p, u))));
            for (user, limit) in scopes {
                let Some(limit) = limit else { continue };
                let (before, after) = (self.usage(p, user), next.usage(p, user));
                if before.iter().zip(&after).any(|(b, a)| a > b && *a > limit) {
                    return false;
                }
            }
        }
        true
    }
}

fn t0() -> DateTime<Utc> {
    (Utc::now() + Duration::days(30)).duration_trunc(Duration::hours(1)).unwrap()
}

fn window(h: &Hold, t0: DateTime<Utc>) -> Window {
    Window { start: t0 + Duration::hours(h.start), end: h.end.map(|e| t0 + Duration::hours(e)) }
}

/// Consumer → (project, user, holds as (provider, used, window)).
type Holdings = BTreeMap<usize, (String, String, Vec<(Uuid, i64, Window)>)>;

struct Case<'a> {
    store: &'a Store,
    providers: &'a [Uuid; 2],
    t0: DateTime<Utc>,
    ids: Vec<Uuid>,
}

impl Case<'_> {
    fn project(&self, p: usize) -> String {
        format!("p{p}")
    }
    fn user(&self, u: usize) -> String {
        format!("u{u}")
    }

    async fn put(&self, consumer: usize, project: usize, user: usize, holds: &[Hold]) -> Result<(), ErrorKind> {
        let allocations = holds
            .iter()
            .map(|h| Allocation {
                provider: self.providers[h.provider],
                resource_class: "VCPU".into(),
                used: h.used,
                window: window(h, self.t0),
            })
            .collect();
        let c = ConsumerAllocations {
            consumer: self.ids[consumer],
            project_id: self.project(project),
            user_id: self.user(user),
            consumer_type: None,
            generation: GenerationCheck::Any,
            allocations,
        };
        self.store.replace_allocations(&meta(), vec![c]).await.map_err(|e| e.kind)
    }

    /// What the store holds, read back into the model's shape.
    async fn read(&self) -> Holdings {
        let mut out = BTreeMap::new();
        for (i, id) in self.ids.iter().enumerate() {
            if let Some(c) = self.store.consumer(*id).await.unwrap() {
                let mut holds: Vec<(Uuid, i64, Window)> = self
                    .store
                    .consumer_allocations(*id)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|a| (a.provider, a.used, a.window))
                    .collect();
                holds.sort_by_key(|h| (h.0, h.2.start, h.2.end, h.1));
                out.insert(i, (c.project_id, c.user_id, holds));
            }
        }
        out
    }

    fn expected(&self, m: &Model) -> Holdings {
        m.consumers
            .iter()
            .map(|(i, (p, u, holds))| {
                // The store merges nothing: one row per hold, as written.
                let mut hs: Vec<(Uuid, i64, Window)> =
                    holds.iter().map(|h| (self.providers[h.provider], h.used, window(h, self.t0))).collect();
                hs.sort_by_key(|h| (h.0, h.2.start, h.2.end, h.1));
                (*i, (self.project(*p), self.user(*u), hs))
            })
            .collect()
    }
}

async fn run_case(ops: Vec<Op>) -> Result<(), TestCaseError> {
    // A fresh database per case: the defaults are global.
    let db = TestDatabase::new().await;
    let store = &db.store(2);
    let providers = &[provider(store, "a", &[("VCPU", 10_000)]).await, provider(store, "b", &[("VCPU", 10_000)]).await];
    let c = Case { store, providers, t0: t0(), ids: (0..CONSUMERS).map(|_| Uuid::new_v4()).collect() };
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let mut next = model.clone();
        let outcome = match op {
            Op::Limit { project, user, value } => {
                let scope = match (project, user) {
                    (None, _) => Scope::defaults(),
                    (Some(p), None) => Scope::project(c.project(*p)),
                    (Some(p), Some(u)) => Scope::user(c.project(*p), c.user(*u)),
                };
                match value {
                    Some(v) => {
                        store.set_quota(&meta(), scope, BTreeMap::from([("VCPU".into(), *v)])).await.unwrap();
                        next.limits.insert((*project, *user), *v);
                    }
                    None => {
                        store.unset_quota(&meta(), scope, vec!["VCPU".into()]).await.unwrap();
                        next.limits.remove(&(*project, *user));
                    }
                }
                model = next;
                continue;
            }
            Op::Put { consumer, project, user, holds } => {
                next.consumers.insert(*consumer, (*project, *user, holds.clone()));
                c.put(*consumer, *project, *user, holds).await
            }
            Op::Resize { consumer, delta } => {
                let Some((p, u, holds)) = model.consumers.get(consumer).cloned() else { continue };
                let holds: Vec<Hold> =
                    holds.into_iter().map(|h| Hold { used: (h.used + delta).clamp(1, 8), ..h }).collect();
                next.consumers.insert(*consumer, (p, u, holds.clone()));
                c.put(*consumer, p, u, &holds).await
            }
            Op::Move { consumer } => {
                let Some((p, u, holds)) = model.consumers.get(consumer).cloned() else { continue };
                let holds: Vec<Hold> = holds.into_iter().map(|h| Hold { provider: 1 - h.provider, ..h }).collect();
                next.consumers.insert(*consumer, (p, u, holds.clone()));
                c.put(*consumer, p, u, &holds).await
            }
            Op::Delete { consumer } => {
                let Some((p, u, _)) = model.consumers.get(consumer).cloned() else { continue };
                next.consumers.remove(consumer);
                c.put(*consumer, p, u, &[]).await
            }
        };
        let allowed = model.allows(&next);
        match outcome {
            Ok(()) => {
                prop_assert!(allowed, "step {step}: {op:?} was written though it passes a limit: {model:?}");
                model = next;
            }
            Err(ErrorKind::Quota) => {
                prop_assert!(!allowed, "step {step}: {op:?} was refused though it fits: {model:?}");
            }
            Err(other) => return Err(TestCaseError::fail(format!("step {step}: {op:?}: unexpected {other:?}"))),
        }
        prop_assert_eq!(c.read().await, c.expected(&model), "step {}: the store differs from the model", step);
    }
    let report = store.replay_verify().await.unwrap();
    prop_assert!(report.is_clean(), "{:?}", report);
    Ok(())
}

#[test]
fn random_changes_never_pass_a_limit_set_before_them() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let config = Config { cases: 24, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    runner.run(&prop::collection::vec(op(), 1..40), |ops| rt.block_on(run_case(ops))).unwrap();
}
