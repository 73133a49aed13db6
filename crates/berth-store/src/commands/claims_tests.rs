//! The claim queue's batching, without a database.

use berth_core::event::Allocation;
use berth_core::Window;
use chrono::{TimeZone, Utc};

use super::*;
use crate::commands::GenerationCheck;

fn claim(claims: &Claims, project: &str, provider: Uuid) -> Uuid {
    let consumer = Uuid::new_v4();
    let from = Utc.with_ymd_and_hms(2031, 1, 1, 0, 0, 0).unwrap();
    let allocation = Allocation { provider, resource_class: "VCPU".into(), used: 1, window: Window::from(from) };
    let consumers = vec![ConsumerAllocations {
        consumer,
        project_id: project.into(),
        user_id: "user".into(),
        consumer_type: None,
        generation: GenerationCheck::New,
        allocations: vec![allocation],
    }];
    let (reply, _) = oneshot::channel();
    claims.state.lock().unwrap().queue.push_back(Pending {
        id: 0,
        queued: Instant::now(),
        meta: EventMeta::default(),
        consumers,
        reply,
    });
    consumer
}

fn consumers(batch: &[Pending]) -> Vec<Uuid> {
    batch.iter().flat_map(|p| p.consumers.iter().map(|c| c.consumer)).collect()
}

/// While a lane decides claims of a project, another lane takes the
/// project's other claims, but never one naming a provider that lane
/// holds: it would only wait for it in the database.
#[test]
fn lanes_grow_with_cores_within_the_pool() {
    let pool = 32;
    assert_eq!(sized_lanes(1, pool), 2);
    assert_eq!(sized_lanes(2, pool), 2, "2 lanes were best on 2 cores");
    assert_eq!(sized_lanes(4, pool), 2);
    assert_eq!(sized_lanes(8, pool), 4);
    assert_eq!(sized_lanes(16, pool), 8, "8 lanes were best on 16 cores");
    assert_eq!(sized_lanes(64, pool), 8, "16 lanes gave no more than 8");
    // A small pool keeps three quarters of its connections for the
    // rest, but never fewer lanes than two.
    assert_eq!(sized_lanes(16, 16), 4);
    assert_eq!(sized_lanes(16, 4), 2);
    assert_eq!(sized_lanes(2, 1), 2);
}

#[test]
fn a_busy_project_is_shared_but_a_busy_provider_is_not() {
    let claims = Claims::new(2, DEFAULT_GATHER);
    let (p1, p2, p3) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let first = claim(&claims, "project", p1);
    let (batch, held) = claims.take(1);
    assert_eq!(consumers(&batch), [first]);
    let same_provider = claim(&claims, "project", p1);
    let other_provider = claim(&claims, "project", p2);
    let (batch, second) = claims.take(2);
    assert_eq!(consumers(&batch), [other_provider], "only the project is shared");
    // Free requests go first, then those of a busy project.
    let busy_project = claim(&claims, "project", p3);
    let other_project = claim(&claims, "other", Uuid::new_v4());
    let (batch, third) = claims.take(3);
    assert_eq!(consumers(&batch), [other_project]);
    let (batch, fourth) = claims.take(4);
    assert_eq!(consumers(&batch), [busy_project]);
    for (lane, locks) in [(2, second), (3, third), (4, fourth)] {
        claims.release(lane, locks);
    }
    let (batch, _) = claims.take(2);
    assert!(batch.is_empty(), "the claim on a busy provider waits for the lane that holds it");
    claims.release(1, held);
    let (batch, _) = claims.take(1);
    assert_eq!(consumers(&batch), [same_provider]);
}

/// A lane waits for a fuller batch only while another lane's batch is
/// in flight and something waits: a claim arriving alone is taken at
/// once, and no wait passes the bound or outlasts the batch in flight.
#[test]
fn a_lane_waits_for_a_fuller_batch_only_while_another_is_in_flight() {
    let most = Duration::from_millis(2);
    let claims = Claims::new(2, most);
    let began = Instant::now();
    let until = |claims: &Claims, now| claims.state.lock().unwrap().gather_until(began, now, most);
    claim(&claims, "project", Uuid::new_v4());
    assert_eq!(until(&claims, began), None, "no batch in flight: taken at once");

    let (batch, held) = claims.take(1);
    assert_eq!(batch.len(), 1);
    assert_eq!(until(&claims, began), None, "nothing waits: nothing to wait with");
    claim(&claims, "project", Uuid::new_v4());
    let started = claims.state.lock().unwrap().in_flight[&1];
    claims.state.lock().unwrap().batch_time = Duration::from_millis(10);
    // Until the batch in flight is halfway, but no longer than the bound.
    assert_eq!(until(&claims, began), Some((started + Duration::from_millis(5)).min(began + most)));
    assert_eq!(until(&claims, began + most), None, "the bound has passed");
    claims.state.lock().unwrap().batch_time = Duration::from_micros(10);
    let halfway = started + Duration::from_micros(5);
    assert_eq!(until(&claims, halfway), None, "the batch in flight is halfway");

    claims.state.lock().unwrap().batch_time = Duration::from_millis(10);
    claims.release(1, held);
    assert_eq!(until(&claims, began), None, "the batch ended: taken at once");
    let (batch, _) = claims.take(2);
    assert_eq!(batch.len(), 1);

    // A full batch waiting is taken at once.
    for _ in 0..MAX_BATCH {
        claim(&claims, "other", Uuid::new_v4());
    }
    assert_eq!(until(&claims, began), None);
}
