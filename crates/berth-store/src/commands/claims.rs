//! Claims decided together: requests to replace consumers' allocations that
//! arrive while others are in flight wait in a queue, and the next free lane
//! takes all that wait (up to [`MAX_BATCH`]) into one transaction.
//!
//! Why: a claim's cost is mostly fixed per statement and per transaction
//! (locks on tables and indexes, executor start, a round trip), not per row.
//! Ten claims decided in one transaction pay that once. Each request is
//! still decided on its own, in arrival order, seeing the holds of those
//! accepted before it (allocations.rs), and gets its own log events with its
//! own metadata; a refused request writes nothing and does not affect the
//! others. When there is no queue, a claim runs at once in a batch of one.
//!
//! The batch runs in a task of its own, so a caller that goes away (a client
//! hanging up) never cancels the transaction of the others.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use berth_core::{Error, EventMeta};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use super::allocations::{write_allocations, ConsumerAllocations, Decision, Request};
use crate::Store;

/// Most requests one transaction decides.
const MAX_BATCH: usize = 32;

/// Batches in flight at once, unless configured: while one waits for the
/// database, another is being decided. More lanes make smaller batches; on
/// a 2-core server, 2 lanes gave the most claims per second (1: 2,323/s,
/// 2: 2,921 to 3,144/s, 3: 2,745/s, 6: 2,475/s).
pub const DEFAULT_LANES: usize = 2;

struct Pending {
    meta: EventMeta,
    consumers: Vec<ConsumerAllocations>,
    reply: oneshot::Sender<Result<Decision, Error>>,
}

/// The queue of claims waiting for a lane.
pub(crate) struct Claims {
    queue: Mutex<VecDeque<Pending>>,
    lanes: Arc<Semaphore>,
}

impl Default for Claims {
    fn default() -> Claims {
        Claims::with_lanes(DEFAULT_LANES)
    }
}

impl Claims {
    pub(crate) fn with_lanes(lanes: usize) -> Claims {
        Claims { queue: Mutex::new(VecDeque::new()), lanes: Arc::new(Semaphore::new(lanes.max(1))) }
    }

    /// Decides one request, together with whatever else is waiting.
    pub(crate) async fn submit(
        &self,
        store: &Store,
        meta: &EventMeta,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<Decision, Error> {
        let (reply, answer) = oneshot::channel();
        self.queue.lock().expect("claims queue").push_back(Pending { meta: meta.clone(), consumers, reply });
        self.start_lane(store);
        answer.await.map_err(|_| Error::internal("the batch deciding this claim ended without an answer"))?
    }

    /// Starts a lane if one is free. Every request pushed is followed by
    /// this call, and a lane only stops after finding the queue empty with
    /// its permit given back, so no request is left waiting with no lane.
    fn start_lane(&self, store: &Store) {
        if let Ok(permit) = self.lanes.clone().try_acquire_owned() {
            tokio::spawn(drain(store.clone(), permit));
        }
    }

    /// The next batch: waiting requests in arrival order, skipping (for the
    /// next batch) any that names a consumer already taken.
    fn take(&self) -> Vec<Pending> {
        let mut queue = self.queue.lock().expect("claims queue");
        let mut batch = Vec::new();
        let mut taken: BTreeSet<Uuid> = BTreeSet::new();
        let mut i = 0;
        while i < queue.len() && batch.len() < MAX_BATCH {
            if queue[i].consumers.iter().any(|c| taken.contains(&c.consumer)) {
                i += 1;
                continue;
            }
            let p = queue.remove(i).expect("in range");
            taken.extend(p.consumers.iter().map(|c| c.consumer));
            batch.push(p);
        }
        batch
    }

    fn is_empty(&self) -> bool {
        self.queue.lock().expect("claims queue").is_empty()
    }
}

/// A lane: decides batches until the queue is empty.
async fn drain(store: Store, permit: OwnedSemaphorePermit) {
    loop {
        let batch = store.claims.take();
        if batch.is_empty() {
            break;
        }
        decide(&store, batch).await;
    }
    drop(permit);
    // A request pushed after the last look found every lane busy.
    if !store.claims.is_empty() {
        store.claims.start_lane(&store);
    }
}

/// Decides a batch in one transaction and answers every request. When the
/// transaction itself fails (not a refusal: those are per request), each
/// request is tried alone so that one cannot fail the others.
async fn decide(store: &Store, batch: Vec<Pending>) {
    let requests: Vec<Request<'_>> = batch.iter().map(|p| Request { meta: &p.meta, consumers: &p.consumers }).collect();
    let outcome = crate::tx::command!(store, |tx| { write_allocations(tx, &requests, &[], true).await });
    match outcome {
        Ok(decisions) => {
            for (p, d) in batch.into_iter().zip(decisions) {
                let _ = p.reply.send(Ok(d));
            }
        }
        Err(e) if batch.len() == 1 => {
            let p = batch.into_iter().next().expect("one");
            let _ = p.reply.send(Err(e));
        }
        Err(_) => {
            for p in batch {
                let request = [Request { meta: &p.meta, consumers: &p.consumers }];
                let outcome = crate::tx::command!(store, |tx| { write_allocations(tx, &request, &[], true).await });
                let _ = p.reply.send(outcome.map(|d| d.into_iter().next().expect("one decision per request")));
            }
        }
    }
}
