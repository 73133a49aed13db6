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

use std::collections::{HashMap, HashSet, VecDeque};
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

/// What a request locks that another lane's batch may lock too.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Lock {
    Consumer(Uuid),
    Provider(Uuid),
    /// The project's quota guard and its rows of open-ended usage.
    Project(String),
}

impl Pending {
    fn locks(&self) -> impl Iterator<Item = Lock> + '_ {
        self.consumers.iter().flat_map(|c| {
            [Lock::Consumer(c.consumer), Lock::Project(c.project_id.clone())]
                .into_iter()
                .chain(c.allocations.iter().map(|a| Lock::Provider(a.provider)))
        })
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Pending>,
    /// What the batches in flight lock, with how many of them do.
    busy: HashMap<Lock, usize>,
}

impl State {
    fn free(&self, p: &Pending, taken: &HashSet<Lock>) -> bool {
        p.locks().all(|l| !self.busy.contains_key(&l) && !matches!(l, Lock::Consumer(_) if taken.contains(&l)))
    }
}

/// The queue of claims waiting for a lane.
pub(crate) struct Claims {
    state: Mutex<State>,
    lanes: Arc<Semaphore>,
}

impl Default for Claims {
    fn default() -> Claims {
        Claims::with_lanes(DEFAULT_LANES)
    }
}

impl Claims {
    pub(crate) fn with_lanes(lanes: usize) -> Claims {
        Claims { state: Mutex::new(State::default()), lanes: Arc::new(Semaphore::new(lanes.max(1))) }
    }

    /// Decides one request, together with whatever else is waiting.
    pub(crate) async fn submit(
        &self,
        store: &Store,
        meta: &EventMeta,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<Decision, Error> {
        let (reply, answer) = oneshot::channel();
        self.state.lock().expect("claims").queue.push_back(Pending { meta: meta.clone(), consumers, reply });
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

    /// The next batch: waiting requests in arrival order, never two naming
    /// the same consumer. Requests naming a consumer, provider or project
    /// that a batch in flight locks are left for later while others wait
    /// (they would only wait for that batch in the database); when only
    /// such requests wait, they are taken all the same (one busy project
    /// must not leave the other lanes idle). Marks what the batch locks as
    /// busy.
    fn take(&self) -> (Vec<Pending>, Vec<Lock>) {
        let mut state = self.state.lock().expect("claims");
        let mut batch = Vec::new();
        let mut taken: HashSet<Lock> = HashSet::new();
        for only_free in [true, false] {
            let mut i = 0;
            while i < state.queue.len() && batch.len() < MAX_BATCH {
                let p = &state.queue[i];
                let ok = if only_free {
                    state.free(p, &taken)
                } else {
                    p.consumers.iter().all(|c| !taken.contains(&Lock::Consumer(c.consumer)))
                };
                if !ok {
                    i += 1;
                    continue;
                }
                let p = state.queue.remove(i).expect("in range");
                taken.extend(p.locks());
                batch.push(p);
            }
            if !batch.is_empty() {
                break;
            }
        }
        let taken: Vec<Lock> = taken.into_iter().collect();
        for l in &taken {
            *state.busy.entry(l.clone()).or_default() += 1;
        }
        (batch, taken)
    }

    fn release(&self, locks: Vec<Lock>) {
        let mut state = self.state.lock().expect("claims");
        for l in locks {
            if let Some(n) = state.busy.get_mut(&l) {
                *n -= 1;
                if *n == 0 {
                    state.busy.remove(&l);
                }
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.state.lock().expect("claims").queue.is_empty()
    }
}

/// A lane: decides batches until the queue is empty.
async fn drain(store: Store, permit: OwnedSemaphorePermit) {
    loop {
        let (batch, locks) = store.claims.take();
        if batch.is_empty() {
            break;
        }
        decide(&store, batch).await;
        store.claims.release(locks);
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
    metrics::histogram!("berth_claim_batch_size").record(batch.len() as f64);
    let requests: Vec<Request<'_>> = batch.iter().map(|p| Request { meta: &p.meta, consumers: &p.consumers }).collect();
    let outcome = crate::tx::command!(store, |tx| { write_allocations(tx, &requests).await });
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
                let outcome = crate::tx::command!(store, |tx| { write_allocations(tx, &request).await });
                let _ = p.reply.send(outcome.map(|d| d.into_iter().next().expect("one decision per request")));
            }
        }
    }
}
