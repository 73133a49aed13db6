//! A claim sent again after its answer was lost (`berth.outcome_unknown`):
//! the same request, at the generation it gave, is refused as Placement
//! refuses a stale generation, and the refusal says it was made; it is made
//! once. Another request at that generation is refused without that.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use crate::common;

use berth_core::error::{ErrorCode, Refusal};
use berth_core::Window;
use berth_store::commands::GenerationCheck::{self, Exactly, New};
use berth_store::testing::TestDatabase;
use chrono::Utc;
use common::*;
use tokio_postgres::NoTls;
use uuid::Uuid;

async fn log_length(url: &str) -> i64 {
    let (c, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    c.query_one("SELECT count(*) FROM log_events", &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_claim_sent_again_at_the_generation_it_gave_is_refused_saying_it_was_made_and_made_once() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let rp = provider(&store, "rp", &[("VCPU", 8)]).await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let claim = |id: Uuid, generation: GenerationCheck, vcpus: i64| {
        // Each request holds from its own now, as Placement's do.
        consumer(id, generation, vec![hold(rp, "VCPU", vcpus, Window::from(Utc::now()))])
    };
    let generation = |id: Uuid| {
        let store = store.clone();
        async move { store.consumer(id).await.unwrap().map(|c| c.generation) }
    };
    let sent_twice = |request: Vec<_>| {
        let (store, url) = (store.clone(), db.url.clone());
        async move {
            store.replace_allocations(&meta(), request.clone()).await.unwrap();
            let made = log_length(&url).await;
            let e = store.replace_allocations(&meta(), request).await.unwrap_err();
            assert_eq!(e.code, ErrorCode::ConcurrentUpdate, "{e}");
            assert!(said_made(&e), "the refusal says the request was made: {e:?}");
            assert_eq!(log_length(&url).await, made, "made once");
        }
    };

    sent_twice(vec![claim(a, New, 1)]).await;
    assert_eq!(generation(a).await, Some(1));
    sent_twice(vec![claim(a, Exactly(1), 2)]).await;
    assert_eq!(generation(a).await, Some(2));
    let e = store.replace_allocations(&meta(), vec![claim(a, Exactly(1), 3)]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ConcurrentUpdate, "another request at a stale generation: {e}");
    assert!(!said_made(&e), "another request was not made: {e:?}");

    // Several consumers: said made only when every one was made as asked.
    sent_twice(vec![claim(a, Exactly(2), 1), claim(b, New, 1)]).await;
    assert_eq!((generation(a).await, generation(b).await), (Some(3), Some(1)));
    let e = store.replace_allocations(&meta(), vec![claim(a, Exactly(2), 1), claim(b, New, 2)]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ConcurrentUpdate, "{e}");
    assert!(!said_made(&e), "b holds 1, not 2: {e:?}");
    assert_eq!(store.consumer_allocations(b).await.unwrap().iter().map(|r| r.used).sum::<i64>(), 1);
}

/// Whether a refusal says the request was made already.
fn said_made(e: &berth_core::Error) -> bool {
    matches!(e.refusal.as_deref(), Some(Refusal::ConsumerGeneration { made: true, .. }))
}
