//! Allocation candidates with a small limit read trees a page at a time
//! (`queries::candidates`, the `providers_roots_in_order` index): the
//! answer must be the first `limit` candidates of the whole answer, in the
//! same order, with the same summaries, whatever the trees look like and
//! however the providers changed since; and it must read about `limit`
//! trees, not every tree.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use berth_store::commands::{GenerationCheck, NewProvider};
use berth_store::queries::candidates::{Candidate, CandidateGroup, CandidateRequest, SHARING_TRAIT};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::Utc;
use common::*;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

const LIMITS: [usize; 6] = [1, 3, 7, 20, 60, 150];

fn group(suffix: &str, resources: &[(&str, i64)]) -> CandidateGroup {
    CandidateGroup {
        suffix: suffix.into(),
        resources: resources.iter().map(|(c, a)| (c.to_string(), *a)).collect(),
        ..Default::default()
    }
}

/// The requests compared: plain, with a required and a forbidden trait,
/// in one aggregate, granular and isolated, before nested trees (1.29).
fn requests(agg: Uuid, in_tree: Uuid) -> Vec<CandidateRequest> {
    let plain = CandidateRequest {
        groups: vec![group("", &[("VCPU", 2), ("MEMORY_MB", 512)])],
        nested: true,
        ..Default::default()
    };
    let mut traits = plain.clone();
    traits.groups[0].required = vec![BTreeSet::from(["CUSTOM_FAST".to_string(), "CUSTOM_GOLD".to_string()])];
    traits.groups[0].forbidden = BTreeSet::from(["CUSTOM_SLOW".to_string()]);
    let mut member = plain.clone();
    member.groups[0].member_of = vec![BTreeSet::from([agg])];
    let mut tree = plain.clone();
    tree.groups[0].in_tree = Some(in_tree);
    let granular = CandidateRequest {
        groups: vec![group("1", &[("VCPU", 1)]), group("2", &[("VCPU", 1)])],
        isolate: true,
        nested: true,
        ..Default::default()
    };
    let old = CandidateRequest { nested: false, ..plain.clone() };
    let roots = CandidateRequest { root_forbidden: BTreeSet::from(["CUSTOM_SLOW".to_string()]), ..plain.clone() };
    vec![plain, traits, member, tree, granular, old, roots]
}

/// Every candidate `req` gets, and how many trees its search read.
async fn answer(store: &Store, req: &CandidateRequest) -> (Vec<Candidate>, usize) {
    let search = store.candidate_search(req.clone()).await.unwrap();
    let mut out = Vec::new();
    search.walk(|c| {
        out.push(c.clone());
        ControlFlow::Continue(())
    });
    (out, search.trees_read())
}

/// Each request at each limit answers the first `limit` of its whole
/// answer (read without a limit: every tree), with the same summaries.
async fn limited_answers_are_prefixes(store: &Store, reqs: &[CandidateRequest]) {
    for req in reqs {
        let (whole, _) = answer(store, &CandidateRequest { limit: None, ..req.clone() }).await;
        for limit in LIMITS {
            let limited = CandidateRequest { limit: Some(limit), ..req.clone() };
            let (got, _) = answer(store, &limited).await;
            let expected: Vec<Candidate> = whole.iter().take(limit).cloned().collect();
            assert_eq!(got, expected, "limit {limit} of {req:?}");
            let used: BTreeSet<Uuid> = got.iter().flat_map(|c| c.allocations.keys().copied()).collect();
            let paged =
                store.candidate_summaries(&store.candidate_search(limited).await.unwrap(), &used).await.unwrap();
            let full = CandidateRequest { limit: None, ..req.clone() };
            let full = store.candidate_summaries(&store.candidate_search(full).await.unwrap(), &used).await.unwrap();
            assert_eq!(paged, full, "summaries at limit {limit} of {req:?}");
        }
    }
}

/// 200 trees of mixed shapes (more than the first page's 64, so that
/// sparse answers take several pages): bare roots, roots with two children
/// holding the VCPU, roots with traits, in an aggregate, full ones, some
/// roots without any inventory at all.
async fn mixed_cloud(store: &Store, seed: u64) -> (Uuid, Vec<Uuid>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for t in ["CUSTOM_FAST", "CUSTOM_GOLD", "CUSTOM_SLOW"] {
        store.create_trait(&meta(), t).await.unwrap();
    }
    let agg = Uuid::new_v4();
    let mut roots = Vec::new();
    for i in 0..200 {
        let shape = rng.gen_range(0..5);
        let root = match shape {
            // Nested: memory on the root, VCPU on two children.
            0 => {
                let root = provider(store, &format!("root-{i}"), &[("MEMORY_MB", 4096)]).await;
                for k in 0..2 {
                    let child = NewProvider { uuid: None, name: format!("root-{i}-{k}"), parent: Some(root) };
                    let child = store.create_provider(&meta(), child).await.unwrap();
                    set_inventory(store, child, &[("VCPU", 4)]).await;
                }
                root
            }
            // No inventory of the classes asked.
            1 if rng.gen_bool(0.3) => provider(store, &format!("root-{i}"), &[("DISK_GB", 100)]).await,
            _ => provider(store, &format!("root-{i}"), &[("VCPU", rng.gen_range(1..8)), ("MEMORY_MB", 4096)]).await,
        };
        if rng.gen_bool(0.3) {
            let picked = ["CUSTOM_FAST", "CUSTOM_GOLD", "CUSTOM_SLOW"][rng.gen_range(0..3)];
            store.replace_traits(&meta(), root, None, BTreeSet::from([picked.to_string()])).await.unwrap();
        }
        if rng.gen_bool(0.4) {
            store.replace_aggregates(&meta(), root, None, BTreeSet::from([agg]), false).await.unwrap();
        }
        // Full from now on: no candidate on it at all.
        if shape > 1 && rng.gen_bool(0.2) {
            fill(store, root).await;
        }
        roots.push(root);
    }
    (agg, roots)
}

/// Holds every MEMORY_MB of `p` from now on.
async fn fill(store: &Store, p: Uuid) {
    let hold = hold(p, "MEMORY_MB", 4096, berth_core::Window::from(Utc::now()));
    let claim = consumer(Uuid::new_v4(), GenerationCheck::New, vec![hold]);
    store.replace_allocations(&meta(), vec![claim]).await.unwrap();
}

#[tokio::test]
async fn a_limited_answer_is_the_first_of_the_whole_answer() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let (agg, roots) = mixed_cloud(&store, 30).await;
    let reqs = requests(agg, roots[roots.len() / 2]);
    limited_answers_are_prefixes(&store, &reqs).await;
}

#[tokio::test]
async fn a_limited_answer_follows_every_change_to_the_providers() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let (agg, roots) = mixed_cloud(&store, 31).await;
    let reqs = requests(agg, roots[roots.len() / 2]);
    let plain = CandidateRequest { limit: Some(3), ..reqs[0].clone() };
    let (before, _) = answer(&store, &plain).await;
    // Every plain candidate holds MEMORY_MB on its root.
    let first_root = *before[0].allocations.keys().find(|p| roots.contains(p)).unwrap();

    // The first candidate's tree fills up, a tree is deleted, another
    // gains a forbidden trait, a new one appears: each shows at once.
    fill(&store, first_root).await;
    // A bare root among the first candidates (no children, no holds): deletable.
    let gone = before[1..].iter().find(|c| c.allocations.len() == 1).map(|c| *c.allocations.keys().next().unwrap());
    let gone = gone.expect("a bare root among the first three candidates");
    store.delete_provider(&meta(), gone).await.unwrap();
    let slow = roots.iter().copied().find(|r| *r != first_root && *r != gone).unwrap();
    store.replace_traits(&meta(), slow, None, BTreeSet::from(["CUSTOM_SLOW".to_string()])).await.unwrap();
    provider(&store, "late", &[("VCPU", 8), ("MEMORY_MB", 8192)]).await;
    limited_answers_are_prefixes(&store, &reqs).await;
    let (after, _) = answer(&store, &plain).await;
    assert!(after.iter().all(|c| !c.allocations.contains_key(&first_root)), "a full tree is no candidate: {after:?}");

    // A sharing provider makes every tree read again, with the same answers.
    let disk = provider(&store, "shared-disk", &[("DISK_GB", 1000)]).await;
    store.replace_traits(&meta(), disk, None, BTreeSet::from([SHARING_TRAIT.to_string()])).await.unwrap();
    store.replace_aggregates(&meta(), disk, None, BTreeSet::from([agg]), false).await.unwrap();
    limited_answers_are_prefixes(&store, &reqs).await;
}

#[tokio::test]
async fn a_small_limit_reads_one_page_of_trees() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    for i in 0..300 {
        provider(&store, &format!("bare-{i:03}"), &[("VCPU", 8), ("MEMORY_MB", 8192)]).await;
    }
    let req = CandidateRequest {
        groups: vec![group("", &[("VCPU", 1), ("MEMORY_MB", 1024)])],
        nested: true,
        ..Default::default()
    };
    let (all, read) = answer(&store, &req).await;
    assert_eq!((all.len(), read), (300, 300), "without a limit, every tree");
    let (ten, read) = answer(&store, &CandidateRequest { limit: Some(10), ..req.clone() }).await;
    assert_eq!(ten.len(), 10);
    assert_eq!(read, 64, "one tree per candidate here: the first page, of 64 trees, is enough");
    assert_eq!(ten[..], all[..10], "the first ten of the whole answer");
}
