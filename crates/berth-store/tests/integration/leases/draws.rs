//! Consuming a reservation through Placement: a claim naming a
//! reservation's class draws from its slot, and gives the draw back.

use super::*;

/// A claim of `classes` on `provider` for `consumer` of `project`, from now.
pub(super) fn claim(
    consumer: Uuid,
    project: &str,
    provider: Uuid,
    classes: &[(&str, i64)],
) -> berth_store::commands::ConsumerAllocations {
    berth_store::commands::ConsumerAllocations {
        consumer,
        project_id: project.into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: berth_store::commands::GenerationCheck::Any,
        allocations: classes
            .iter()
            .map(|(c, n)| berth_core::event::Allocation {
                provider,
                resource_class: c.to_string(),
                used: *n,
                window: Window::from(Utc::now()),
            })
            .collect(),
    }
}

/// What [`reserve_a_slot`] made.
struct Reserved {
    host: Uuid,
    lease: Uuid,
    /// The reservation's class, which a consumer names to draw from it.
    class: String,
    /// The slot consumer holding the reservation's 4 VCPU.
    slot: Uuid,
}

/// An 8-VCPU host and a lease of project `p`, from now to `t(5)`, whose one
/// instance slot holds 4 VCPU on it.
async fn reserve_a_slot(store: &Store) -> Reserved {
    let host = host(store, "h", 8, json!({})).await;
    let now = NewLease {
        dates: LeaseDates::One { start: DateSpec::Now, end: DateSpec::At(t(5)), before_end: None },
        ..lease("l", "p", 0, 1, vec![slots(1, 4, None)])
    };
    let made = store.create_lease(&meta(), now).await.unwrap().remove(0).record;
    let reservation = &made.reservations[0];
    Reserved {
        host,
        lease: made.id,
        class: berth_core::lease::reservation_class(reservation.id),
        slot: reservation.slots[0].consumer,
    }
}

#[tokio::test]
async fn consumers_draw_from_their_reservation() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let Reserved { host: h, lease: id, class, slot } = reserve_a_slot(&store).await;
    let vcpus_of = |rows: Vec<berth_store::queries::AllocationRow>| {
        rows.iter().filter(|a| a.resource_class == "VCPU").map(|a| a.used).sum::<i64>()
    };
    // Another project cannot draw from it.
    let err = store
        .replace_allocations(&meta(), vec![claim(Uuid::new_v4(), "other", h, &[("VCPU", 2), (&class, 1)])])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Forbidden);
    // The owner draws 2 of the 4 it holds: the hold shrinks, the host's usage does not grow.
    let x = Uuid::new_v4();
    store.replace_allocations(&meta(), vec![claim(x, "p", h, &[("VCPU", 2), (&class, 1)])]).await.unwrap();
    assert_eq!(vcpus_of(store.consumer_allocations(slot).await.unwrap()), 2);
    let xs = store.consumer_allocations(x).await.unwrap();
    assert_eq!(xs.len(), 1, "the reservation's class is not kept: {xs:?}");
    assert_eq!(xs[0].window.end, Some(t(5)), "the consumer's allocation ends with the lease");
    assert_eq!(store.provider_usage_at(h, Utc::now()).await.unwrap()["VCPU"], 4);
    // Without the class, a claim comes on top: 4 more fit, then the host is full.
    let y = Uuid::new_v4();
    store.replace_allocations(&meta(), vec![claim(y, "p", h, &[("VCPU", 4)])]).await.unwrap();
    let z = store.replace_allocations(&meta(), vec![claim(Uuid::new_v4(), "p", h, &[("VCPU", 1)])]).await.unwrap_err();
    assert_eq!(z.kind, ErrorKind::Capacity);
    // Extending the lease carries the drawing consumer's end along.
    store
        .update_lease(&meta(), id, None, LeaseUpdate { end: Some(DateSpec::At(t(6))), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(store.consumer_allocations(x).await.unwrap()[0].window.end, Some(t(6)));
    assert_eq!(vcpus_of(store.consumer_allocations(slot).await.unwrap()), 2);
    // Deleting the consumer gives the hold back.
    store.replace_allocations(&meta(), vec![claim(x, "p", h, &[])]).await.unwrap();
    assert_eq!(vcpus_of(store.consumer_allocations(slot).await.unwrap()), 4);
    assert_replay_clean(&store).await;
    store.delete_lease(&meta(), id, None).await.unwrap();
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn a_draw_given_back_among_claims_in_flight_is_decided_with_them() {
    let db = TestDatabase::new().await;
    let store = db.store(8);
    let Reserved { host: h, class, slot, .. } = reserve_a_slot(&store).await;
    let x = Uuid::new_v4();
    store.replace_allocations(&meta(), vec![claim(x, "p", h, &[("VCPU", 2), (&class, 1)])]).await.unwrap();
    // The slot holds 2, x draws 2: 4 of 8 are free. x gives its draw back
    // (the slot holds 4 again) while six claims of 1 come in: exactly four fit.
    // The log is read directly: a reader's cursor waits for every transaction
    // open on the server, other tests' included.
    let (log, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let before: i64 = log.query_one("SELECT coalesce(max(position), 0) FROM log_events", &[]).await.unwrap().get(0);
    let m = meta();
    let give_back = store.replace_allocations(&m, vec![claim(x, "p", h, &[])]);
    let others = (0..6).map(|_| store.replace_allocations(&m, vec![claim(Uuid::new_v4(), "p", h, &[("VCPU", 1)])]));
    let (given, others) = tokio::join!(give_back, futures::future::join_all(others));
    given.unwrap();
    assert_eq!(others.iter().filter(|r| r.is_ok()).count(), 4, "{others:?}");
    for e in others.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.kind, ErrorKind::Capacity, "{e:?}");
    }
    let vcpus: i64 = store.consumer_allocations(slot).await.unwrap().iter().map(|a| a.used).sum();
    assert_eq!(vcpus, 4);
    // The draw given back and x's allocations gone were written by one transaction.
    let streams = vec![format!("consumer:{x}"), format!("slot:{slot}"), format!("consumer:{slot}")];
    let rows = log
        .query("SELECT txid::text FROM log_events WHERE position > $1 AND stream = ANY($2)", &[&before, &streams])
        .await
        .unwrap();
    let txids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(txids.len(), 3, "the draw, x and the slot: {txids:?}");
    assert!(txids.iter().all(|t| *t == txids[0]), "{txids:?}");
    assert_replay_clean(&store).await;
}
