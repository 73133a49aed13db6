//! Allocation candidates: which providers (one tree, plus sharing providers
//! in an aggregate with it) could satisfy a request, and with what.
//!
//! The search is a depth-first walk over the request's slots (each
//! suffixed group, then each class of the unsuffixed group), one tree at a
//! time. A partial candidate is dropped as soon as it cannot work (a
//! provider over capacity or max_unit with what is already assigned to it,
//! a provider used twice under `group_policy=isolate`, required traits no
//! remaining choice can bring, a `same_subtree` set already broken), and
//! the walk stops at `limit`: wide trees never expand into the full
//! cartesian product. Capacity counts from now on, open-ended, as a claim
//! made now would. With a small limit, trees are read a page at a time until
//! they yield it (world.rs), so the read is bounded by the limit too.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use berth_core::{Error, Inventory};
use uuid::Uuid;

mod search;
mod world;

use search::search;

use super::placement::{check_traits_exist, inventories_from_now};
use crate::client::GenericClient;
use crate::{Store, StoreError};

/// The trait that makes a provider share its inventory with its aggregates.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// One request group. The unsuffixed group (`suffix` empty) may spread its
/// classes over several providers of a tree and sharing providers; a
/// suffixed group is satisfied by one provider.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateGroup {
    pub suffix: String,
    pub resources: BTreeMap<String, i64>,
    /// Each set: at least one of its traits.
    pub required: Vec<BTreeSet<String>>,
    pub forbidden: BTreeSet<String>,
    /// Each set: the provider (or its root) is in one of its aggregates.
    pub member_of: Vec<BTreeSet<Uuid>>,
    pub forbidden_aggregates: BTreeSet<Uuid>,
    pub in_tree: Option<Uuid>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateRequest {
    pub groups: Vec<CandidateGroup>,
    /// `group_policy=isolate`: suffixed groups on distinct providers.
    pub isolate: bool,
    pub limit: Option<usize>,
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    /// Each set of suffixes: their providers all sit under one of them.
    pub same_subtrees: Vec<BTreeSet<String>>,
    /// Several providers of one tree may serve a candidate, and summaries
    /// cover whole trees (1.29 on); before, one provider per tree and
    /// summaries of the providers used only.
    pub nested: bool,
    /// Summaries list every class a provider has (1.27 on), not only the requested ones.
    pub all_classes_in_summaries: bool,
}

/// One way to satisfy the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub allocations: BTreeMap<Uuid, BTreeMap<String, i64>>,
    /// Which providers satisfied which group (by suffix).
    pub mappings: BTreeMap<String, BTreeSet<Uuid>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSummary {
    /// class -> (capacity, used)
    pub resources: BTreeMap<String, (i64, i64)>,
    pub traits: Vec<String>,
    pub parent: Option<Uuid>,
    pub root: Uuid,
}

/// What the search knows about one provider.
#[derive(Debug, Clone, Default)]
pub struct ProviderFacts {
    pub parent: Option<Uuid>,
    pub root: Uuid,
    pub traits: BTreeSet<String>,
    pub aggregates: BTreeSet<Uuid>,
    /// Requested classes it has inventory of, with what is free from now on.
    pub inventory: BTreeMap<String, (Inventory, i64)>,
}

/// The world the search runs over: providers by UUID, in a stable order.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub providers: BTreeMap<Uuid, ProviderFacts>,
    /// Roots in the order trees are tried.
    pub roots: Vec<Uuid>,
}

/// A search ready to walk: the request and everything it reads from the
/// database, loaded in one go. The walk itself ([`CandidateSearch::walk`])
/// does no I/O and may run on a blocking thread while its candidates are
/// written out.
#[derive(Debug, Clone)]
pub struct CandidateSearch {
    req: CandidateRequest,
    world: World,
    classes: Vec<String>,
}

impl Store {
    /// Loads what a search for `req` reads; refuses unknown classes and traits.
    pub async fn candidate_search(&self, req: CandidateRequest) -> Result<CandidateSearch, Error> {
        let c = self.read_client().await?;
        let classes: BTreeSet<&str> = req.groups.iter().flat_map(|g| g.resources.keys().map(String::as_str)).collect();
        let classes: Vec<&str> = classes.into_iter().collect();
        let known: BTreeSet<String> = c
            .query("SELECT name FROM resource_classes WHERE name = ANY($1)", &[&classes])
            .await
            .map_err(StoreError::from)?
            .iter()
            .map(|r| r.get("name"))
            .collect();
        if let Some(unknown) = classes.iter().find(|n| !known.contains(**n)) {
            return Err(crate::refuse::no_class(unknown));
        }
        let mut traits: BTreeSet<String> = BTreeSet::new();
        for g in &req.groups {
            traits.extend(g.required.iter().flatten().cloned());
            traits.extend(g.forbidden.iter().cloned());
        }
        traits.extend(req.root_required.iter().cloned());
        traits.extend(req.root_forbidden.iter().cloned());
        check_traits_exist(&c, &traits).await?;
        let world = world::load(&c, &classes, &req).await?;
        let classes = classes.into_iter().map(str::to_string).collect();
        Ok(CandidateSearch { req, world, classes })
    }

    /// Summaries of every provider in the trees of `used` (the providers
    /// the candidates use; with 1.29 on, their whole trees), as they are now.
    pub async fn candidate_summaries(
        &self,
        search: &CandidateSearch,
        used: &BTreeSet<Uuid>,
    ) -> Result<BTreeMap<Uuid, ProviderSummary>, Error> {
        let c = self.read_client().await?;
        Ok(summaries(&c, search, used).await?)
    }
}

impl CandidateSearch {
    /// Walks the search, giving each candidate to `each` as it is found,
    /// until the request's limit or until `each` breaks; the providers the
    /// given candidates use.
    pub fn walk(&self, mut each: impl FnMut(&Candidate) -> ControlFlow<()>) -> BTreeSet<Uuid> {
        let mut used = BTreeSet::new();
        search(&self.world, &self.req, &mut |c| {
            used.extend(c.allocations.keys().copied());
            each(c)
        });
        used
    }

    /// How many trees the search read (a page's worth, with a small limit).
    #[cfg(any(test, feature = "testing"))]
    pub fn trees_read(&self) -> usize {
        self.world.roots.len()
    }
}

/// Summaries of every provider in the trees the candidates use (and of the
/// sharing providers they use).
async fn summaries(
    c: &impl GenericClient,
    search: &CandidateSearch,
    used: &BTreeSet<Uuid>,
) -> Result<BTreeMap<Uuid, ProviderSummary>, StoreError> {
    let (world, req) = (&search.world, &search.req);
    let roots: BTreeSet<Uuid> = used.iter().map(|p| world.facts(p).root).collect();
    let members: Vec<Uuid> = if req.nested {
        world.providers.iter().filter(|(_, f)| roots.contains(&f.root)).map(|(u, _)| *u).collect()
    } else {
        used.iter().copied().collect()
    };
    let all: Vec<String> = if req.all_classes_in_summaries {
        c.query("SELECT DISTINCT resource_class FROM inventories WHERE provider_uuid = ANY($1)", &[&members])
            .await?
            .iter()
            .map(|r| r.get("resource_class"))
            .collect()
    } else {
        search.classes.clone()
    };
    let wanted: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut out: BTreeMap<Uuid, ProviderSummary> = members
        .iter()
        .map(|p| {
            let f = world.facts(p);
            // Standard traits first, then custom ones, as Placement lists them.
            let mut traits: Vec<String> = f.traits.iter().cloned().collect();
            traits.sort_by_key(|t| (t.starts_with("CUSTOM_"), t.clone()));
            let summary = ProviderSummary { resources: BTreeMap::new(), traits, parent: f.parent, root: f.root };
            (*p, summary)
        })
        .collect();
    for ((p, class), (inv, used)) in inventories_from_now(c, &members, &wanted).await? {
        if let Some(s) = out.get_mut(&p) {
            s.resources.insert(class, (inv.capacity(), used));
        }
    }
    Ok(out)
}
