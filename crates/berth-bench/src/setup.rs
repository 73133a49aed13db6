//! What the claim scenarios start from.

use std::collections::BTreeMap;

use anyhow::Result;
use berth_core::event::Allocation;
use berth_core::lease::{self, LeaseRecord, LeaseStatus, ReservationRecord, ReservationStatus, Slot};
use berth_core::{Event, EventMeta, Inventory, Window};
use berth_store::commands::{ConsumerAllocations, GenerationCheck, NewProvider, SLOT_CONSUMER_TYPE};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

/// A store on `db` for the claim scenarios: the claim lanes wait for a
/// fuller batch as `BERTH_CLAIM_GATHER_US` says when it is set, as berthd
/// reads it (the wrk scenario's berthd inherits it), else by default.
pub fn claim_store(db: &TestDatabase, pool_size: usize) -> Result<Store> {
    let store = db.store(pool_size);
    Ok(match std::env::var("BERTH_CLAIM_GATHER_US") {
        Ok(us) => store.with_claim_gather(std::time::Duration::from_micros(us.parse()?)),
        Err(_) => store,
    })
}

/// Claims made before a claim scenario's timed phase.
pub const WARM_CLAIMS: usize = 2_000;

/// Brings `db` to a steady state before a timed phase: [`WARM_CLAIMS`]
/// claims on `providers` (16 at a time), then the statistics autovacuum's
/// analyze would give them. Without it the phase ran on the plans its first
/// statements chose on empty tables (cached per connection until an analyze
/// invalidates them, which autovacuum does within a minute, after the
/// phase): the claim's read of others' open holds took the whole-timeline
/// index in some runs and its own in others, a third of the claim rate
/// apart.
pub async fn warm(db: &TestDatabase, store: &Store, providers: &[Uuid]) -> Result<()> {
    let meta = EventMeta { actor: Some("bench-warm".into()), ..Default::default() };
    // Each lane claims on its own providers: at most 16, none without one.
    let lanes = providers.len().min(16);
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let (store, meta) = (store.clone(), meta.clone());
        let mine: Vec<Uuid> = providers.iter().copied().skip(lane).step_by(lanes).collect();
        tasks.push(tokio::spawn(async move {
            for &p in mine.iter().cycle().take(WARM_CLAIMS / lanes) {
                store.replace_allocations(&meta, vec![claim(p, "bench-warm".into(), "bench-warm".into())]).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    db.analyze().await;
    Ok(())
}

/// `count` providers named `{prefix}{i}`, each with this VCPU and MEMORY_MB
/// inventory.
pub async fn providers(
    store: &Store,
    meta: &EventMeta,
    count: usize,
    prefix: &str,
    vcpu: i64,
    memory_mb: i64,
) -> Result<Vec<Uuid>> {
    let mut providers = Vec::with_capacity(count);
    for i in 0..count {
        let p =
            store.create_provider(meta, NewProvider { uuid: None, name: format!("{prefix}{i}"), parent: None }).await?;
        let inv = BTreeMap::from([
            ("VCPU".to_string(), Inventory { total: vcpu, ..Default::default() }),
            ("MEMORY_MB".to_string(), Inventory { total: memory_mb, ..Default::default() }),
        ]);
        store.replace_inventories(meta, p, None, inv).await?;
        providers.push(p);
    }
    Ok(providers)
}

/// A new consumer's claim of 1 VCPU and 256 MEMORY_MB on `provider`, from now
/// on, open-ended.
pub fn claim(provider: Uuid, project_id: String, user_id: String) -> ConsumerAllocations {
    let now = Window::from(Utc::now());
    ConsumerAllocations {
        consumer: Uuid::new_v4(),
        project_id,
        user_id,
        consumer_type: None,
        generation: GenerationCheck::New,
        allocations: vec![
            Allocation { provider, resource_class: "VCPU".into(), used: 1, window: now },
            Allocation { provider, resource_class: "MEMORY_MB".into(), used: 256, window: now },
        ],
    }
}

/// Books one-host leases `(host, start, end)` holding `whole` of each, as
/// the log would hold them (the events lease creation records, without
/// deciding each one), appended in batches: what the lease scenarios book
/// before they time creations.
pub async fn book(
    store: &Store,
    meta: &EventMeta,
    whole: &BTreeMap<String, i64>,
    leases: impl IntoIterator<Item = (Uuid, DateTime<Utc>, DateTime<Utc>)>,
) -> Result<()> {
    let at = Utc::now();
    let mut batch = Vec::new();
    for (provider, start, end) in leases {
        let slot = Slot { consumer: Uuid::new_v4(), provider, resources: whole.clone() };
        // Named by its id, so that a database may be booked more than once.
        let id = Uuid::new_v4();
        let record = LeaseRecord {
            id,
            name: format!("booked-{id}"),
            project_id: "bench".into(),
            user_id: "bench".into(),
            start,
            end,
            status: LeaseStatus::Pending,
            degraded: false,
            recurrence_id: None,
            time_zone: None,
            reservations: vec![ReservationRecord {
                id: Uuid::new_v4(),
                resource_type: "physical:host".into(),
                resource_id: Uuid::new_v4(),
                status: ReservationStatus::Pending,
                params: json!({"min": 1, "max": 1}),
                slots: vec![slot.clone()],
                created_at: at,
                missing_resources: false,
                resources_changed: false,
            }],
            events: lease::new_events(start, end - chrono::Duration::minutes(30), end),
        };
        let window = Window { start, end: Some(end) };
        batch.push(Event::LeaseCreated { lease: record, at });
        batch.push(Event::AllocationsReplaced {
            consumer: slot.consumer,
            project_id: "bench".into(),
            user_id: "bench".into(),
            consumer_type: Some(SLOT_CONSUMER_TYPE.into()),
            allocations: whole
                .iter()
                .map(|(c, u)| Allocation { provider, resource_class: c.clone(), used: *u, window })
                .collect(),
            // As a creation names it, so that a batch is projected as a
            // run of creations, in one round trip.
            providers_bumped: Some(vec![provider]),
            at,
        });
        if batch.len() >= 2_000 {
            store.append(meta, &batch, None).await?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        store.append(meta, &batch, None).await?;
    }
    Ok(())
}
