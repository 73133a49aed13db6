//! Sharing a lease: a project it is shared with draws from its slots (its
//! own quota bearing on what it draws), a third project does not, an
//! unshared project keeps what it drew but draws no more, and replay
//! rebuilds the shares.

use berth_core::quota::Scope;

use super::draws::claim;
use super::*;

fn vcpus(rows: Vec<berth_store::queries::AllocationRow>) -> i64 {
    rows.iter().filter(|a| a.resource_class == "VCPU").map(|a| a.used).sum()
}

fn projects(v: &[&str]) -> Vec<String> {
    v.iter().map(|p| p.to_string()).collect()
}

#[tokio::test]
async fn a_shared_reservation_is_drawn_from_by_the_projects_named_and_no_other() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let h = host(&store, "h", 8, json!({})).await;
    let now = NewLease {
        dates: LeaseDates::One { start: DateSpec::Now, end: DateSpec::At(t(5)), before_end: None },
        ..lease("l", "p", 0, 1, vec![slots(1, 4, None)])
    };
    let made = store.create_lease(&meta(), now).await.unwrap().remove(0).record;
    let (id, rid) = (made.id, made.reservations[0].id);
    let (class, slot) = (berth_core::lease::reservation_class(rid), made.reservations[0].slots[0].consumer);

    // Bad lists change nothing.
    for bad in [projects(&["p"]), projects(&["q", "q"]), projects(&["not a project"])] {
        let e = store.share_lease(&meta(), id, None, &bad).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::ShareInvalid, "{bad:?}");
    }
    // Another project's member does not even see the lease.
    let e = store.share_lease(&meta(), id, Some("q"), &projects(&["r"])).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::LeaseNotFound);
    assert!(store.lease(id, None).await.unwrap().shared_with.is_empty());

    let shared = store.share_lease(&meta(), id, Some("p"), &projects(&["s", "q"])).await.unwrap();
    assert_eq!(shared, projects(&["q", "s"]), "sorted");
    assert_eq!(store.lease(id, None).await.unwrap().shared_with, shared);
    let listed = store.leases_shared_with("q", None, 10).await.unwrap();
    assert_eq!(listed.iter().map(|l| l.record.id).collect::<Vec<_>>(), vec![id]);
    assert!(store.leases_shared_with("r", None, 10).await.unwrap().is_empty());

    // A third project: the same refusal as before sharing.
    let e = store
        .replace_allocations(&meta(), vec![claim(Uuid::new_v4(), "r", h, &[("VCPU", 2), (&class, 1)])])
        .await
        .unwrap_err();
    assert_eq!((e.kind, e.code), (ErrorKind::Forbidden, ErrorCode::ReservationNotYours));

    // q draws: its own quota bears on what it draws (its instances), while
    // the owner's slot shrinks by it and the host's usage does not grow.
    store.set_quota(&meta(), Scope::project("q"), BTreeMap::from([("VCPU".to_string(), 1)])).await.unwrap();
    let x = Uuid::new_v4();
    let e = store.replace_allocations(&meta(), vec![claim(x, "q", h, &[("VCPU", 2), (&class, 1)])]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::QuotaExceeded, "{e:?}");
    store.set_quota(&meta(), Scope::project("q"), BTreeMap::from([("VCPU".to_string(), 2)])).await.unwrap();
    store.replace_allocations(&meta(), vec![claim(x, "q", h, &[("VCPU", 2), (&class, 1)])]).await.unwrap();
    assert_eq!(vcpus(store.consumer_allocations(slot).await.unwrap()), 2);
    assert_eq!(store.provider_usage_at(h, Utc::now()).await.unwrap()["VCPU"], 4);
    assert_replay_clean(&store).await;

    // Unshared: q keeps what it drew, but draws no more.
    store.share_lease(&meta(), id, None, &projects(&["s"])).await.unwrap();
    assert_eq!(vcpus(store.consumer_allocations(x).await.unwrap()), 2);
    assert_eq!(vcpus(store.consumer_allocations(slot).await.unwrap()), 2);
    let e = store
        .replace_allocations(&meta(), vec![claim(Uuid::new_v4(), "q", h, &[("VCPU", 1), (&class, 1)])])
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ReservationNotYours);
    assert!(store.leases_shared_with("q", None, 10).await.unwrap().is_empty());
    assert_replay_clean(&store).await;

    // A deleted lease's shares go with it.
    store.delete_lease(&meta(), id, None).await.unwrap();
    assert!(store.leases_shared_with("s", None, 10).await.unwrap().is_empty());
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn the_same_list_again_records_nothing() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    host(&store, "h", 8, json!({})).await;
    let made = store.create_lease(&meta(), lease("l", "p", 1, 2, vec![slots(1, 4, None)])).await.unwrap();
    let id = made[0].record.id;
    store.share_lease(&meta(), id, None, &projects(&["q", "r"])).await.unwrap();
    let before = store.replay_verify().await.unwrap().events;
    store.share_lease(&meta(), id, None, &projects(&["r", "q"])).await.unwrap();
    assert_eq!(store.replay_verify().await.unwrap().events, before);
    store.share_lease(&meta(), id, None, &[]).await.unwrap();
    assert_eq!(store.replay_verify().await.unwrap().events, before + 1);
    assert!(store.lease(id, None).await.unwrap().shared_with.is_empty());
    assert_replay_clean(&store).await;
}
