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
//! made now would.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use berth_core::{Error, Inventory};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::inventory_at;
use super::placement::{check_traits_exist, peaks_from_now};
use crate::{Store, StoreError};
use berth_core::error::codes::RESOURCE_CLASS_NOT_FOUND;

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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    pub candidates: Vec<Candidate>,
    pub summaries: BTreeMap<Uuid, ProviderSummary>,
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

impl World {
    fn facts(&self, p: &Uuid) -> &ProviderFacts {
        &self.providers[p]
    }

    fn is_ancestor_or_self(&self, a: Uuid, mut p: Uuid) -> bool {
        loop {
            if p == a {
                return true;
            }
            match self.providers.get(&p).and_then(|f| f.parent) {
                Some(parent) => p = parent,
                None => return false,
            }
        }
    }

    /// `amount` of `class` fits on `p` by itself (units, step, free capacity).
    fn fits(&self, p: &Uuid, class: &str, amount: i64) -> bool {
        self.facts(p).inventory.get(class).is_some_and(|(inv, free)| {
            amount >= inv.min_unit && amount <= inv.max_unit && amount % inv.step_size == 0 && amount <= *free
        })
    }

    fn member_ok(&self, p: &Uuid, g: &CandidateGroup) -> bool {
        let f = self.facts(p);
        let root_aggs = self.providers.get(&f.root).map(|r| &r.aggregates);
        let in_any = |set: &BTreeSet<Uuid>| {
            set.iter().any(|a| f.aggregates.contains(a) || root_aggs.is_some_and(|r| r.contains(a)))
        };
        g.member_of.iter().all(in_any) && !in_any(&g.forbidden_aggregates)
    }

    fn tree_ok(&self, p: &Uuid, g: &CandidateGroup) -> bool {
        match g.in_tree {
            None => true,
            Some(t) => self.providers.get(&t).is_some_and(|tf| tf.root == self.facts(p).root),
        }
    }

    fn traits_ok(&self, p: &Uuid, g: &CandidateGroup) -> bool {
        let t = &self.facts(p).traits;
        g.required.iter().all(|any| any.iter().any(|x| t.contains(x))) && g.forbidden.is_disjoint(t)
    }
}

/// One choice to make: a suffixed group (one provider for all of it) or one
/// class of the unsuffixed group.
#[derive(Debug, Clone)]
struct Slot {
    group: usize,
    /// The classes and amounts this slot puts on the chosen provider.
    amounts: Vec<(String, i64)>,
    options: Vec<Uuid>,
    /// A suffixed group (counts for isolation and same_subtree).
    granular: bool,
}

struct Walk<'a> {
    world: &'a World,
    req: &'a CandidateRequest,
    slots: Vec<Slot>,
    /// For each same_subtree set: the slot after which it can be checked.
    subtree_checks: Vec<(usize, Vec<usize>)>,
    unsuffixed: Option<usize>,
    chosen: Vec<Uuid>,
    load: HashMap<(Uuid, String), i64>,
    seen: HashSet<Seen>,
    out: Vec<Candidate>,
    limit: usize,
}

impl Walk<'_> {
    fn done(&self) -> bool {
        self.out.len() >= self.limit
    }

    fn go(&mut self, i: usize) {
        if self.done() {
            return;
        }
        if i == self.slots.len() {
            self.emit();
            return;
        }
        for k in 0..self.slots[i].options.len() {
            let p = self.slots[i].options[k];
            if !self.admits(i, p) {
                continue;
            }
            for (c, a) in &self.slots[i].amounts {
                *self.load.entry((p, c.clone())).or_default() += a;
            }
            self.chosen.push(p);
            if self.still_possible(i) {
                self.go(i + 1);
            }
            self.chosen.pop();
            for (c, a) in &self.slots[i].amounts {
                *self.load.get_mut(&(p, c.clone())).expect("loaded above") -= a;
            }
            if self.done() {
                return;
            }
        }
    }

    /// Whether `p` may take slot `i` given what is already chosen.
    fn admits(&self, i: usize, p: Uuid) -> bool {
        let slot = &self.slots[i];
        if !self.req.nested {
            let root = self.world.facts(&p).root;
            if self.chosen.iter().any(|q| *q != p && self.world.facts(q).root == root) {
                return false;
            }
        }
        if slot.granular && self.req.isolate {
            let taken = self.chosen.iter().enumerate().any(|(j, q)| self.slots[j].granular && *q == p);
            if taken {
                return false;
            }
        }
        slot.amounts.iter().all(|(c, a)| {
            let (inv, free) = &self.world.facts(&p).inventory[c];
            let total = self.load.get(&(p, c.clone())).copied().unwrap_or(0) + a;
            total <= *free && total <= inv.max_unit
        })
    }

    /// After choosing slot `i`: can the rest still succeed?
    fn still_possible(&self, i: usize) -> bool {
        for (last, members) in &self.subtree_checks {
            if *last == i && !self.same_subtree(members) {
                return false;
            }
        }
        // Required traits of the unsuffixed group: each set must be met by a
        // chosen provider or still be meetable by a remaining choice.
        if let Some(g) = self.unsuffixed {
            let group = &self.req.groups[g];
            let chosen: Vec<&Uuid> =
                self.chosen.iter().enumerate().filter(|(j, _)| self.slots[*j].group == g).map(|(_, p)| p).collect();
            for any in &group.required {
                let has = |p: &Uuid| any.iter().any(|t| self.world.facts(p).traits.contains(t));
                let met = chosen.iter().any(|p| has(p));
                let later = self.slots[i + 1..].iter().filter(|s| s.group == g).any(|s| s.options.iter().any(has));
                if !met && !later {
                    return false;
                }
            }
        }
        true
    }

    fn same_subtree(&self, members: &[usize]) -> bool {
        let ps: BTreeSet<Uuid> = members.iter().map(|j| self.chosen[*j]).collect();
        ps.iter().any(|a| ps.iter().all(|p| self.world.is_ancestor_or_self(*a, *p)))
    }

    fn emit(&mut self) {
        let mut allocations: BTreeMap<Uuid, BTreeMap<String, i64>> = BTreeMap::new();
        let mut mappings: BTreeMap<String, BTreeSet<Uuid>> = BTreeMap::new();
        for (j, p) in self.chosen.iter().enumerate() {
            let slot = &self.slots[j];
            for (c, a) in &slot.amounts {
                *allocations.entry(*p).or_default().entry(c.clone()).or_default() += a;
            }
            mappings.entry(self.req.groups[slot.group].suffix.clone()).or_default().insert(*p);
        }
        // Resourceless groups put nothing on a provider; they only shape the choice.
        allocations.retain(|_, r| !r.is_empty());
        // The same allocations reached with the same mappings are one candidate.
        let key: Seen = (
            allocations.iter().flat_map(|(p, r)| r.iter().map(move |(c, a)| (*p, c.clone(), *a))).collect(),
            mappings.iter().map(|(s, ps)| (s.clone(), ps.iter().copied().collect())).collect(),
        );
        if self.seen.insert(key) {
            self.out.push(Candidate { allocations, mappings });
        }
    }
}

/// What makes two candidates the same: their allocations and their mappings.
type Seen = (Vec<(Uuid, String, i64)>, Vec<(String, Vec<Uuid>)>);

/// The candidates in `world` for `req`, at most `req.limit` of them.
pub fn search(world: &World, req: &CandidateRequest) -> Vec<Candidate> {
    let limit = req.limit.unwrap_or(usize::MAX);
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen: HashSet<Seen> = HashSet::new();
    let sharing: Vec<Uuid> =
        world.providers.iter().filter(|(_, f)| f.traits.contains(SHARING_TRAIT)).map(|(u, _)| *u).collect();
    for root in &world.roots {
        if out.len() >= limit {
            break;
        }
        let rf = world.facts(root);
        if !req.root_required.is_subset(&rf.traits) || !req.root_forbidden.is_disjoint(&rf.traits) {
            continue;
        }
        let tree: Vec<Uuid> = world.providers.iter().filter(|(_, f)| f.root == *root).map(|(u, _)| *u).collect();
        // Sharing providers in an aggregate with some provider of this tree.
        let tree_aggs: BTreeSet<Uuid> = tree.iter().flat_map(|p| world.facts(p).aggregates.iter().copied()).collect();
        let mut avail = tree.clone();
        for s in &sharing {
            if world.facts(s).root != *root && !world.facts(s).aggregates.is_disjoint(&tree_aggs) {
                avail.push(*s);
            }
        }
        let Some(slots) = slots_for(world, req, &avail) else { continue };
        let unsuffixed = req.groups.iter().position(|g| g.suffix.is_empty());
        let subtree_checks = req
            .same_subtrees
            .iter()
            .filter_map(|set| {
                let members: Vec<usize> = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.granular && set.contains(&req.groups[s.group].suffix))
                    .map(|(j, _)| j)
                    .collect();
                members.iter().max().map(|last| (*last, members.clone()))
            })
            .collect();
        let mut walk = Walk {
            world,
            req,
            slots,
            subtree_checks,
            unsuffixed,
            chosen: Vec::new(),
            load: HashMap::new(),
            seen: std::mem::take(&mut seen),
            out: std::mem::take(&mut out),
            limit,
        };
        walk.go(0);
        out = walk.out;
        seen = walk.seen;
    }
    out
}

/// The slots of one tree, most constrained first; `None` when some slot has
/// no option at all (the tree cannot serve the request).
fn slots_for(world: &World, req: &CandidateRequest, avail: &[Uuid]) -> Option<Vec<Slot>> {
    let mut slots = Vec::new();
    for (gi, g) in req.groups.iter().enumerate() {
        if g.suffix.is_empty() {
            for (class, amount) in &g.resources {
                let options: Vec<Uuid> = avail
                    .iter()
                    .filter(|p| {
                        world.fits(p, class, *amount)
                            && world.member_ok(p, g)
                            && world.tree_ok(p, g)
                            && g.forbidden.is_disjoint(&world.facts(p).traits)
                    })
                    .copied()
                    .collect();
                slots.push(Slot { group: gi, amounts: vec![(class.clone(), *amount)], options, granular: false });
            }
        } else {
            let options: Vec<Uuid> = avail
                .iter()
                .filter(|p| {
                    g.resources.iter().all(|(c, a)| world.fits(p, c, *a))
                        && world.traits_ok(p, g)
                        && world.member_ok(p, g)
                        && world.tree_ok(p, g)
                })
                .copied()
                .collect();
            let amounts = g.resources.iter().map(|(c, a)| (c.clone(), *a)).collect();
            slots.push(Slot { group: gi, amounts, options, granular: true });
        }
    }
    if slots.iter().any(|s| s.options.is_empty()) {
        return None;
    }
    // Granular groups first (they carry the isolation and subtree rules),
    // then the fewest options first: dead ends show up early.
    slots.sort_by_key(|s| (!s.granular, s.options.len()));
    Some(slots)
}

impl Store {
    /// The allocation candidates for `req`, with summaries of the providers
    /// in the trees they use.
    pub async fn allocation_candidates(&self, req: &CandidateRequest) -> Result<Candidates, Error> {
        let c = self.client().await?;
        let classes: BTreeSet<&str> = req.groups.iter().flat_map(|g| g.resources.keys().map(String::as_str)).collect();
        let classes: Vec<&str> = classes.into_iter().collect();
        let known: BTreeSet<String> = c
            .query("SELECT name FROM resource_classes WHERE name = ANY($1)", &[&classes])
            .await
            .map_err(StoreError::from)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if let Some(unknown) = classes.iter().find(|n| !known.contains(**n)) {
            return Err(Error::invalid(RESOURCE_CLASS_NOT_FOUND, format!("No such resource class {unknown}.")));
        }
        let mut traits: BTreeSet<String> = BTreeSet::new();
        for g in &req.groups {
            traits.extend(g.required.iter().flatten().cloned());
            traits.extend(g.forbidden.iter().cloned());
        }
        traits.extend(req.root_required.iter().cloned());
        traits.extend(req.root_forbidden.iter().cloned());
        check_traits_exist(&c, &traits).await?;
        let world = load_world(&c, &classes).await?;
        let candidates = search(&world, req);
        let summaries = summaries(&c, &world, &candidates, req, &classes).await?;
        Ok(Candidates { candidates, summaries })
    }
}

/// Every tree that has inventory of a requested class, every tree a sharing
/// provider with such inventory is in an aggregate with, and what the search
/// needs to know of their providers.
async fn load_world(c: &impl GenericClient, classes: &[&str]) -> Result<World, StoreError> {
    let rows = c
        .query(
            "SELECT DISTINCT p.root_uuid FROM inventories i JOIN providers p ON p.uuid = i.provider_uuid
             WHERE i.resource_class = ANY($1)
             UNION
             SELECT m.root_uuid FROM inventories i
             JOIN provider_traits t ON t.provider_uuid = i.provider_uuid AND t.trait = $2
             JOIN provider_aggregates sa ON sa.provider_uuid = i.provider_uuid
             JOIN provider_aggregates ma ON ma.aggregate = sa.aggregate
             JOIN providers m ON m.uuid = ma.provider_uuid
             WHERE i.resource_class = ANY($1)",
            &[&classes, &SHARING_TRAIT],
        )
        .await?;
    let roots: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
    let mut world = World::default();
    let rows = c
        .query(
            "SELECT uuid, parent_uuid, root_uuid FROM providers WHERE root_uuid = ANY($1) ORDER BY created_at, uuid",
            &[&roots],
        )
        .await?;
    for r in &rows {
        let facts = ProviderFacts { parent: r.get(1), root: r.get(2), ..Default::default() };
        world.providers.insert(r.get(0), facts);
    }
    world.roots = rows.iter().filter(|r| r.get::<_, Option<Uuid>>(1).is_none()).map(|r| r.get(0)).collect();
    let ids: Vec<Uuid> = world.providers.keys().copied().collect();
    for r in c.query("SELECT provider_uuid, trait FROM provider_traits WHERE provider_uuid = ANY($1)", &[&ids]).await? {
        if let Some(f) = world.providers.get_mut(&r.get::<_, Uuid>(0)) {
            f.traits.insert(r.get(1));
        }
    }
    for r in c
        .query("SELECT provider_uuid, aggregate FROM provider_aggregates WHERE provider_uuid = ANY($1)", &[&ids])
        .await?
    {
        if let Some(f) = world.providers.get_mut(&r.get::<_, Uuid>(0)) {
            f.aggregates.insert(r.get(1));
        }
    }
    let peaks = peaks_from_now(c, &ids, classes).await?;
    for r in c
        .query(
            "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
             FROM inventories WHERE provider_uuid = ANY($1) AND resource_class = ANY($2)",
            &[&ids, &classes],
        )
        .await?
    {
        let (p, class): (Uuid, String) = (r.get(0), r.get(1));
        let inv = inventory_at(&r, 2);
        let used = peaks.get(&(p, class.clone())).copied().unwrap_or(0);
        if let Some(f) = world.providers.get_mut(&p) {
            f.inventory.insert(class, (inv, inv.capacity() - used));
        }
    }
    Ok(world)
}

/// Summaries of every provider in the trees the candidates use (and of the
/// sharing providers they use).
async fn summaries(
    c: &impl GenericClient,
    world: &World,
    candidates: &[Candidate],
    req: &CandidateRequest,
    classes: &[&str],
) -> Result<BTreeMap<Uuid, ProviderSummary>, StoreError> {
    let used: BTreeSet<Uuid> = candidates.iter().flat_map(|c| c.allocations.keys().copied()).collect();
    let roots: BTreeSet<Uuid> = used.iter().map(|p| world.facts(p).root).collect();
    let members: Vec<Uuid> = if req.nested {
        world.providers.iter().filter(|(_, f)| roots.contains(&f.root)).map(|(u, _)| *u).collect()
    } else {
        used.into_iter().collect()
    };
    let all: Vec<String> = if req.all_classes_in_summaries {
        c.query("SELECT DISTINCT resource_class FROM inventories WHERE provider_uuid = ANY($1)", &[&members])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect()
    } else {
        classes.iter().map(|s| s.to_string()).collect()
    };
    let wanted: Vec<&str> = all.iter().map(String::as_str).collect();
    let peaks = peaks_from_now(c, &members, &wanted).await?;
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
    for r in c
        .query(
            "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
             FROM inventories WHERE provider_uuid = ANY($1) AND resource_class = ANY($2)",
            &[&members, &wanted],
        )
        .await?
    {
        let (p, class): (Uuid, String) = (r.get(0), r.get(1));
        let inv = inventory_at(&r, 2);
        let used = peaks.get(&(p, class.clone())).copied().unwrap_or(0);
        if let Some(s) = out.get_mut(&p) {
            s.resources.insert(class, (inv.capacity(), used));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(total: i64) -> Inventory {
        Inventory { total, ..Default::default() }
    }

    /// A root with `children` children, each with 4 VCPU free.
    fn wide(children: usize) -> World {
        let mut w = World::default();
        let root = Uuid::from_u128(1);
        w.providers.insert(root, ProviderFacts { root, ..Default::default() });
        w.roots.push(root);
        for i in 0..children {
            let p = Uuid::from_u128(100 + i as u128);
            let mut f = ProviderFacts { parent: Some(root), root, ..Default::default() };
            f.inventory.insert("VCPU".into(), (inv(4), 4));
            w.providers.insert(p, f);
        }
        w
    }

    fn group(suffix: &str, vcpu: i64) -> CandidateGroup {
        CandidateGroup {
            suffix: suffix.into(),
            resources: BTreeMap::from([("VCPU".into(), vcpu)]),
            ..Default::default()
        }
    }

    #[test]
    fn wide_trees_stop_at_the_limit() {
        // 200 children, 8 isolated groups: the full product is astronomically
        // large; with a limit the walk ends after a handful of steps.
        let w = wide(200);
        let groups = (1..=8).map(|i| group(&i.to_string(), 1)).collect();
        let req = CandidateRequest { groups, isolate: true, limit: Some(3), nested: true, ..Default::default() };
        let found = search(&w, &req);
        assert_eq!(found.len(), 3);
        for c in &found {
            assert_eq!(c.allocations.len(), 8, "isolated groups use eight providers");
        }
    }

    #[test]
    fn capacity_is_shared_between_groups_on_one_provider() {
        let w = wide(1);
        let req = CandidateRequest { groups: vec![group("1", 3), group("2", 3)], nested: true, ..Default::default() };
        assert!(search(&w, &req).is_empty(), "3 + 3 VCPU do not fit in 4");
        let req = CandidateRequest { groups: vec![group("1", 2), group("2", 2)], nested: true, ..Default::default() };
        let found = search(&w, &req);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].allocations.values().next().unwrap()["VCPU"], 4);
    }

    #[test]
    fn unsuffixed_traits_come_from_the_providers_used() {
        let mut w = wide(2);
        let ssd = Uuid::from_u128(101);
        w.providers.get_mut(&ssd).unwrap().traits.insert("STORAGE_DISK_SSD".into());
        let mut g = group("", 1);
        g.required = vec![BTreeSet::from(["STORAGE_DISK_SSD".to_string()])];
        let req = CandidateRequest { groups: vec![g], nested: true, ..Default::default() };
        let found = search(&w, &req);
        assert_eq!(found.len(), 1);
        assert!(found[0].allocations.contains_key(&ssd));
    }

    #[test]
    fn same_subtree_needs_a_common_ancestor_among_the_chosen() {
        let mut w = wide(2);
        let (a, b) = (Uuid::from_u128(100), Uuid::from_u128(101));
        // b under a.
        w.providers.get_mut(&b).unwrap().parent = Some(a);
        let req = CandidateRequest {
            groups: vec![group("x", 4), group("y", 4)],
            isolate: true,
            same_subtrees: vec![BTreeSet::from(["x".to_string(), "y".to_string()])],
            nested: true,
            ..Default::default()
        };
        assert_eq!(search(&w, &req).len(), 2, "a and b, either way round (the mappings differ)");
        w.providers.get_mut(&b).unwrap().parent = Some(Uuid::from_u128(1));
        assert!(search(&w, &req).is_empty(), "siblings share no subtree rooted at either");
    }
}
