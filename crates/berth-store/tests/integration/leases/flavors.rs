//! Flavor reservations: a flavor's resources and traits (required,
//! forbidden, any of) decide which hosts hold its instances, with affinity.

use std::collections::BTreeSet;

use berth_core::flavor::Flavor;

use super::*;

fn flavor(amount: u32, affinity: Option<bool>, specs: &[(&str, &str)]) -> NewReservation {
    let f = Flavor {
        name: "f".into(),
        vcpus: 2,
        ram: 512,
        disk: 10,
        ephemeral: 0,
        extra_specs: specs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    let (resources, traits) = f.demand().unwrap();
    NewReservation {
        resource_type: "flavor:instance".into(),
        params: json!({"flavor_id": "f", "amount": amount}),
        demand: Demand::Slots { amount, resources, affinity, resource_properties: None, traits },
    }
}

async fn with_traits(store: &Store, name: &str, traits: &[&str]) -> Uuid {
    let id = host(store, name, 8, json!({})).await;
    for t in traits {
        store.create_trait(&meta(), t).await.unwrap();
    }
    let set: BTreeSet<String> = traits.iter().map(|t| t.to_string()).collect();
    store.replace_traits(&meta(), id, None, set).await.unwrap();
    id
}

async fn providers(store: &Store, lease: &NewLease) -> Result<Vec<Uuid>, berth_core::Error> {
    let made = store.create_lease(&meta(), lease.clone()).await?;
    Ok(made[0].record.reservations[0].slots.iter().map(|s| s.provider).collect())
}

#[tokio::test]
async fn flavor_traits_choose_the_hosts() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let fast = with_traits(&store, "fast", &["CUSTOM_GPU", "CUSTOM_A100"]).await;
    let slow = with_traits(&store, "slow", &["CUSTOM_GPU", "CUSTOM_SLOW", "CUSTOM_H100"]).await;
    let plain = with_traits(&store, "plain", &[]).await;
    // Required and forbidden: only fast; three instances of 2 vcpus fit on its 8.
    let gpu_not_slow = [("trait:CUSTOM_GPU", "required"), ("trait:CUSTOM_SLOW", "forbidden")];
    let got = providers(&store, &lease("a", "p", 1, 2, vec![flavor(3, None, &gpu_not_slow)])).await.unwrap();
    assert_eq!(got, vec![fast; 3]);
    // The forbidden host is never taken, even when the allowed one is full.
    let err = providers(&store, &lease("b", "p", 1, 2, vec![flavor(2, None, &gpu_not_slow)])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    // Any of: slow has H100; plain has neither.
    let any = [("trait:in:CUSTOM_H100,CUSTOM_FPGA", "required")];
    let got = providers(&store, &lease("c", "p", 1, 2, vec![flavor(4, None, &any)])).await.unwrap();
    assert_eq!(got, vec![slow; 4]);
    let err = providers(&store, &lease("d", "p", 1, 2, vec![flavor(1, None, &any)])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity, "slow is full, plain has none of them");
    // A forbidden trait alone: only plain serves.
    let no_gpu = [("trait:CUSTOM_GPU", "forbidden")];
    assert_eq!(providers(&store, &lease("e", "p", 1, 2, vec![flavor(1, None, &no_gpu)])).await.unwrap(), vec![plain]);
    // A flavor's own class must exist on the host.
    let gpu_slice = [("resources:CUSTOM_GPU_SLICE", "1")];
    let err = providers(&store, &lease("f", "p", 3, 4, vec![flavor(1, None, &gpu_slice)])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    assert_replay_clean(&store).await;
}

#[tokio::test]
async fn flavor_instances_follow_affinity() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let gpu = ["CUSTOM_GPU"];
    let a = with_traits(&store, "a", &gpu).await;
    let b = with_traits(&store, "b", &gpu).await;
    with_traits(&store, "c", &[]).await;
    let want = [("trait:CUSTOM_GPU", "required")];
    let apart = providers(&store, &lease("apart", "p", 1, 2, vec![flavor(2, Some(false), &want)])).await.unwrap();
    assert_eq!(apart.iter().collect::<BTreeSet<_>>(), BTreeSet::from([&a, &b]));
    // Three apart need three GPU hosts; c lacks the trait.
    let err = providers(&store, &lease("three", "p", 3, 4, vec![flavor(3, Some(false), &want)])).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Capacity);
    let together = providers(&store, &lease("together", "p", 3, 4, vec![flavor(4, Some(true), &want)])).await.unwrap();
    assert_eq!(together.iter().collect::<BTreeSet<_>>().len(), 1);
    assert_replay_clean(&store).await;
}
