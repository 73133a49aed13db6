//! Splits and transfers racing lease creations for the same hosts and the
//! same project's quota: no instant holds more than a host has, none holds
//! more of the receiving project than its limit, every slot stays in
//! exactly one lease, and replay gives the projections.

use berth_core::lease::split::{SplitPart, Take};
use berth_core::quota::Scope;
use berth_store::commands::{Handover, SplitAsk};

use super::*;

fn split_into(name: &str, project: &str, reservation: Uuid) -> SplitAsk {
    SplitAsk {
        name: name.into(),
        parts: vec![SplitPart { reservation, take: Take::Count(1) }],
        project_id: project.into(),
        offer_to: None,
        offered_by: "admin".into(),
    }
}

#[tokio::test]
async fn splits_transfers_and_creations_racing_keep_capacity_quotas_and_slots() {
    let db = TestDatabase::new().await;
    let store = db.store(12);
    let mut providers = Vec::new();
    for i in 0..6 {
        providers.push(host(&store, &format!("h{i}"), 8, json!({})).await);
    }
    let limits = BTreeMap::from([("VCPU".to_string(), 16)]);
    store.set_quota(&meta(), Scope::project("b"), limits).await.unwrap();
    let big = store.create_lease(&meta(), lease("big", "a", 2, 8, vec![hosts(3, 3, json!([]))])).await.unwrap();
    let one = store.create_lease(&meta(), lease("one", "a", 2, 8, vec![hosts(1, 1, json!([]))])).await.unwrap();
    let (big, one) = (big[0].record.clone(), one[0].record.clone());
    let (rid, big_id, one_id) = (big.reservations[0].id, big.id, one.id);
    let mut tasks = Vec::new();
    for k in 0..3 {
        let store = store.clone();
        let ask = split_into(&format!("part-{k}"), "b", rid);
        tasks.push(tokio::spawn(async move { store.split_lease(&meta(), big_id, None, ask).await.map(drop) }));
    }
    {
        let store = store.clone();
        let how = Handover::Admin { to_project: "b".into(), user_id: None };
        tasks.push(tokio::spawn(async move { store.transfer_lease(&meta(), one_id, how).await.map(drop) }));
    }
    for k in 0..8 {
        let store = store.clone();
        let project = if k % 2 == 0 { "b" } else { "c" };
        let new = lease(&format!("new-{k}"), project, 1 + k % 4, 5 + k % 3, vec![hosts(1, 1, json!([]))]);
        tasks.push(tokio::spawn(async move { store.create_lease(&meta(), new).await.map(drop) }));
    }
    let mut done = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => done += 1,
            Err(e) => assert!(
                matches!(e.kind, ErrorKind::Capacity | ErrorKind::Quota | ErrorKind::Conflict),
                "a refusal, not a failure: {e:?}"
            ),
        }
    }
    assert!(done > 0);
    // No host over capacity at any hour.
    for p in &providers {
        for h in 0..10 {
            let used = store.provider_usage_at(*p, t(h) + Duration::minutes(30)).await.unwrap();
            assert!(used.get("VCPU").copied().unwrap_or(0) <= 8, "{p} at {h}: {used:?}");
        }
    }
    // Project b within its limit at every instant.
    let now = Utc::now();
    let report = store.quota_usage("b", None, t(0), Some(t(12)), now).await.unwrap();
    assert!(report.usage["VCPU"].peak <= 16, "{:?}", report.usage["VCPU"]);
    // Every slot of the first lease is in exactly one lease, and it kept one.
    let all = store.leases(&Default::default()).await.unwrap();
    let mut consumers: Vec<Uuid> = all
        .iter()
        .flat_map(|l| l.record.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)))
        .collect();
    let n = consumers.len();
    consumers.sort();
    consumers.dedup();
    assert_eq!(consumers.len(), n, "a slot in two leases");
    let kept = store.lease(big.id, None).await.unwrap().record;
    assert!(!kept.reservations[0].slots.is_empty());
    let family: usize = all
        .iter()
        .filter(|l| l.record.id == big.id || l.record.name.starts_with("part-"))
        .map(|l| l.record.reservations[0].slots.len())
        .sum();
    assert_eq!(family, 3);
    // A slot's holds are its lease's project's.
    let projects = store.consumer_projects(&consumers).await.unwrap();
    for l in &all {
        for s in &l.record.reservations[0].slots {
            assert_eq!(projects.get(&s.consumer), Some(&l.record.project_id), "{}", l.record.name);
        }
    }
    assert_replay_clean(&store).await;
}
