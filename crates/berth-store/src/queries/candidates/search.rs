//! The search itself, over what was loaded (a [`World`]), without I/O: a
//! depth-first walk over the request's slots that drops a partial candidate
//! as soon as it cannot work, and stops at the limit. Each candidate goes to
//! the caller as it is found and is not kept: an answer of tens of thousands
//! of candidates is written out as it is walked, and only a hash of each
//! stays behind to drop duplicates.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::ops::ControlFlow;

use uuid::Uuid;

use super::{Candidate, CandidateGroup, CandidateRequest, ProviderFacts, World, SHARING_TRAIT};

impl World {
    pub(super) fn facts(&self, p: &Uuid) -> &ProviderFacts {
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
    seen: &'a mut Seen,
    each: &'a mut dyn FnMut(&Candidate) -> ControlFlow<()>,
    /// Candidates given to `each` so far, over every tree.
    emitted: &'a mut usize,
    /// The caller asked to stop.
    stopped: bool,
    limit: usize,
}

impl Walk<'_> {
    fn done(&self) -> bool {
        self.stopped || *self.emitted >= self.limit
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
        let candidate = Candidate { allocations, mappings };
        // The same allocations reached with the same mappings are one candidate.
        if self.seen.insert(&candidate) {
            *self.emitted += 1;
            self.stopped = (self.each)(&candidate).is_break();
        }
    }
}

/// The candidates already given out, as 128-bit hashes of their allocations
/// and mappings (two independently keyed hashes): the walk keeps no
/// candidate, and a false "seen" needs two 64-bit collisions at once.
struct Seen {
    hashes: HashSet<(u64, u64)>,
    keys: (RandomState, RandomState),
}

impl Seen {
    fn new() -> Seen {
        Seen { hashes: HashSet::new(), keys: (RandomState::new(), RandomState::new()) }
    }

    /// Whether `c` is new (and now seen).
    fn insert(&mut self, c: &Candidate) -> bool {
        let key = (&c.allocations, &c.mappings);
        self.hashes.insert((self.keys.0.hash_one(key), self.keys.1.hash_one(key)))
    }
}

/// Walks `world` for `req`, giving each candidate to `each` as it is found,
/// until `req.limit` candidates were given or `each` breaks.
pub fn search(world: &World, req: &CandidateRequest, each: &mut dyn FnMut(&Candidate) -> ControlFlow<()>) {
    let limit = req.limit.unwrap_or(usize::MAX);
    let mut emitted = 0usize;
    let mut seen = Seen::new();
    let sharing: Vec<Uuid> =
        world.providers.iter().filter(|(_, f)| f.traits.contains(SHARING_TRAIT)).map(|(u, _)| *u).collect();
    for root in &world.roots {
        if emitted >= limit {
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
            seen: &mut seen,
            each: &mut *each,
            emitted: &mut emitted,
            stopped: false,
            limit,
        };
        walk.go(0);
        if walk.stopped {
            return;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use berth_core::Inventory;

    /// Every candidate the walk gives.
    fn search(w: &World, req: &CandidateRequest) -> Vec<Candidate> {
        let mut found = Vec::new();
        super::search(w, req, &mut |c| {
            found.push(c.clone());
            ControlFlow::Continue(())
        });
        found
    }

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

    #[test]
    fn every_isolated_arrangement_once_and_a_break_stops_the_walk() {
        // 8 children, six isolated groups: 8·7·6·5·4·3 arrangements, each
        // with its own mappings, none given twice.
        let w = wide(8);
        let groups = (1..=6).map(|i| group(&i.to_string(), 1)).collect();
        let req = CandidateRequest { groups, isolate: true, nested: true, ..Default::default() };
        let found = search(&w, &req);
        assert_eq!(found.len(), 20_160);
        let distinct: BTreeSet<_> = found.iter().map(|c| c.mappings.clone()).collect();
        assert_eq!(distinct.len(), 20_160);
        let mut given = 0;
        super::search(&w, &req, &mut |_| {
            given += 1;
            if given == 10 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(given, 10, "the walk stops when the caller says so");
    }

    #[test]
    fn a_sharing_provider_reached_from_several_trees_is_one_candidate() {
        // Two compute trees and a shared disk in an aggregate with both: a
        // request for disk alone reaches the disk from each tree (and from
        // its own), and is one candidate.
        let mut w = World::default();
        let agg = Uuid::from_u128(9);
        for r in [1u128, 2] {
            let root = Uuid::from_u128(r);
            let f = ProviderFacts { root, aggregates: BTreeSet::from([agg]), ..Default::default() };
            w.providers.insert(root, f);
            w.roots.push(root);
        }
        let disk = Uuid::from_u128(3);
        let mut f = ProviderFacts { root: disk, aggregates: BTreeSet::from([agg]), ..Default::default() };
        f.traits.insert(SHARING_TRAIT.into());
        f.inventory.insert("DISK_GB".into(), (inv(100), 100));
        w.providers.insert(disk, f);
        w.roots.push(disk);
        let g = CandidateGroup { resources: BTreeMap::from([("DISK_GB".into(), 10)]), ..Default::default() };
        let req = CandidateRequest { groups: vec![g], nested: true, ..Default::default() };
        let found = search(&w, &req);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].allocations.contains_key(&disk));
    }
}
