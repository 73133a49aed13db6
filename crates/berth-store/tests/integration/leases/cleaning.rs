//! Cleaning time: a host stays unreservable for a while after each lease
//! on it, in creation, update and advice alike.

use super::*;

fn cleaned(db: &TestDatabase, hours: u64) -> Store {
    db.store(4).with_cleaning_time(std::time::Duration::from_secs(hours * 3600))
}

#[tokio::test]
async fn cleaning_time_refuses_back_to_back_and_accepts_after_the_gap() {
    let db = TestDatabase::new().await;
    let store = cleaned(&db, 2);
    let only = host(&store, "only", 4, json!({})).await;
    let whole = || vec![hosts(1, 1, json!([]))];
    let a = store.create_lease(&meta(), lease("a", "p", 1, 3, whole())).await.unwrap()[0].record.id;
    for (name, start, end) in [("back-to-back", 3, 4), ("in-the-cleaning", 4, 5), ("just-before", 0, 1)] {
        let err = store.create_lease(&meta(), lease(name, "p", start, end, whole())).await.unwrap_err();
        assert_eq!(err.code, "berth.lease.reservation_0.no_capacity", "{name}");
    }
    // Instance slots on the host wait for the cleaning as well.
    let err = store.create_lease(&meta(), lease("slot", "p", 4, 5, vec![slots(1, 1, None)])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    let c = store.create_lease(&meta(), lease("after", "p", 5, 6, whole())).await.unwrap().remove(0).record;
    assert_eq!(c.reservations[0].slots[0].provider, only);
    // An update is checked alike: a may not grow into c's cleaning before it.
    let end = |h| LeaseUpdate { end: Some(DateSpec::At(t(h))), ..Default::default() };
    let err = store.update_lease(&meta(), a, None, end(4)).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    // Advice: the earliest hour-long window is after c and its cleaning.
    let found = store.availability("p", &[hosts(1, 1, json!([]))], Duration::hours(1), t(0), t(20), 1).await;
    assert_eq!(found.unwrap()[0].start, t(8));
    let ext = store.extension(a, None, t(20)).await.unwrap();
    assert_eq!(ext.latest_end, Some(t(3)), "a's end plus its cleaning must stay before c");
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn a_host_may_name_a_cleaning_time_of_its_own() {
    let db = TestDatabase::new().await;
    let store = cleaned(&db, 2);
    host(&store, "quick", 4, json!({"cleaning_time": "0", "kind": "quick"})).await;
    host(&store, "slow", 4, json!({"cleaning_time": 300, "kind": "slow"})).await;
    let on = |kind: &str| vec![hosts(1, 1, json!(["==", "$kind", kind]))];
    store.create_lease(&meta(), lease("q1", "p", 1, 3, on("quick"))).await.unwrap();
    store.create_lease(&meta(), lease("q2", "p", 3, 4, on("quick"))).await.unwrap();
    store.create_lease(&meta(), lease("s1", "p", 1, 3, on("slow"))).await.unwrap();
    let err = store.create_lease(&meta(), lease("s2", "p", 6, 7, on("slow"))).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity, "five hours of cleaning on slow");
    store.create_lease(&meta(), lease("s3", "p", 8, 9, on("slow"))).await.unwrap();
    assert_replay_clean(&store).await;
}
