//! Placement's operations against a real database: the policy's decision
//! comes before anything is written.

use std::sync::Arc;

use berth_app::placement::allocations::{Claim, GenerationCheck, Hold};
use berth_app::placement::inventories::Capacity;
use berth_app::placement::providers::NewProvider;
use berth_app::placement::{May, Rule as P};
use berth_app::{App, Caller, Error, Gate, Owner, Policy, Rule};
use berth_core::Inventory;
use berth_store::testing::TestDatabase;
use uuid::Uuid;

/// Rules that allow exactly `0`'s.
struct Only(Vec<P>);

impl Gate for Only {
    fn allows(&self, rule: Rule, _: Owner<'_>) -> bool {
        matches!(rule, Rule::Placement(r) if self.0.contains(&r))
    }
    fn refusal(&self, _: Rule) -> Error {
        Error::Forbidden
    }
    fn name(&self, _: Rule) -> &'static str {
        "test"
    }
}

fn caller(rules: Vec<P>) -> Caller<'static> {
    Caller { user_id: "u", project_id: "p", request_id: "req-test".into(), gate: Box::new(Only(rules)) }
}

fn claim(consumer: Uuid, provider: Uuid) -> Claim {
    Claim {
        consumer,
        project_id: "p".into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: GenerationCheck::New,
        holds: vec![Hold { provider, resource_class: "VCPU".into(), used: 2 }],
    }
}

/// A provider with 8 VCPU, made by a caller allowed to.
async fn provider(app: &App) -> Uuid {
    let admin = caller(vec![P::ProvidersCreate, P::InventoriesCreate]);
    let may = app.placement().may(&admin, P::ProvidersCreate).unwrap();
    let new = NewProvider { uuid: None, name: "rp".into(), parent: None };
    let uuid = app.placement().providers().create(&may, new).await.unwrap();
    let may = app.placement().may(&admin, P::InventoriesCreate).unwrap();
    let rp = app.placement().provider(&may, uuid).await.unwrap();
    let inv = Inventory { total: 8, ..Inventory::default() };
    app.placement().inventories().add(&may, &rp, "VCPU", inv, Capacity::Positive).await.unwrap();
    uuid
}

async fn held(app: &App, may: &May, consumer: Uuid) -> bool {
    app.placement().allocations().of_consumer(may, consumer).await.unwrap().is_some()
}

#[tokio::test]
async fn a_refused_caller_claims_nothing() {
    let db = TestDatabase::new().await;
    let app = App::new(db.store(2), Arc::new(berth_plugins::Registry::new()), Arc::new(Policy::default()));
    let rp = provider(&app).await;
    let consumer = Uuid::new_v4();
    let reader = caller(vec![P::AllocationsList]);
    let read = app.placement().may(&reader, P::AllocationsList).unwrap();
    let before = app.placement().provider(&read, rp).await.unwrap().generation;

    // The rules refuse the claim itself...
    assert!(matches!(app.placement().may(&reader, P::AllocationsUpdate), Err(Error::Forbidden)));
    // ...and leave for another rule claims nothing either.
    let claimed = app.placement().allocations().claim(&read, claim(consumer, rp)).await;
    assert!(matches!(claimed, Err(Error::Forbidden)), "{claimed:?}");
    let many = app.placement().allocations().claim_many(&read, vec![claim(consumer, rp)]).await;
    assert!(matches!(many, Err(Error::Forbidden)), "{many:?}");
    assert!(!held(&app, &read, consumer).await, "a refused claim wrote allocations");
    let after = app.placement().provider(&read, rp).await.unwrap();
    assert_eq!(after.generation, before, "a refused claim moved the provider's generation");

    // A caller the rules allow claims the same.
    let writer = caller(vec![P::AllocationsUpdate]);
    let may = app.placement().may(&writer, P::AllocationsUpdate).unwrap();
    app.placement().allocations().claim(&may, claim(consumer, rp)).await.unwrap();
    assert!(held(&app, &read, consumer).await);
}
