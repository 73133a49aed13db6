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
//!
//! A lane about to take a batch while another lane's is in flight may
//! first wait until that batch is halfway (by how long batches take), as
//! long as configured at most ([`DEFAULT_GATHER`]: not at all): lanes
//! started in step split the waiting claims unevenly, one taking most and
//! the next a batch of one that pays a whole transaction for one claim.
//! Kept half a batch apart, each lane takes what the other answered. A
//! claim arriving while no batch is in flight is taken at once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::{Error, EventMeta};
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use uuid::Uuid;

use super::allocations::{write_allocations, ConsumerAllocations, Decision, Request};
use crate::Store;

/// Most requests one transaction decides.
const MAX_BATCH: usize = 32;

/// The fewest batches in flight at once that [`sized_lanes`] chooses:
/// while one waits for the database, another is being decided. More lanes
/// make smaller batches; on a 2-core server, 2 lanes gave the most claims
/// per second (1: 2,323/s, 2: 2,921 to 3,144/s, 3: 2,745/s, 6: 2,475/s).
pub const DEFAULT_LANES: usize = 2;

/// The most lanes [`sized_lanes`] chooses: on 16 cores 8 lanes gave the
/// most claims over HTTP (8,838/s at 64 connections), 16 no more.
pub const MAX_SIZED_LANES: usize = 8;

/// Lanes sized to the machine, unless configured: what limits claims is
/// the transactions in flight, not the database (its backends were busy,
/// not waiting), and the best count grew with cores (2 on 2 cores, 8 on
/// 16), so one lane per two cores between [`DEFAULT_LANES`] and
/// [`MAX_SIZED_LANES`]. Each lane holds a connection while its batch is
/// in flight: beyond [`DEFAULT_LANES`], a quarter of the pool at most, so
/// requests and the manager keep the rest.
pub fn sized_lanes(cores: usize, pool_size: usize) -> usize {
    (cores / 2).clamp(DEFAULT_LANES, MAX_SIZED_LANES).min((pool_size / 4).max(DEFAULT_LANES))
}

/// This machine's cores, as the scheduler lets this process use them.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Longest a lane waits for a fuller batch while another lane's batch is
/// in flight, unless configured (`Duration::ZERO`: never). Off by default:
/// under load (four builds beside the bench) a 2 ms bound made batches a
/// quarter fuller and claims faster in most pairs, but on a quiet 2-core
/// machine it gained nothing measurable (docs/performance.md).
pub const DEFAULT_GATHER: Duration = Duration::ZERO;

/// How much longer than the store's deadline a claim waits for its
/// batch's answer before answering itself: a batch taken at once answers
/// at its own deadline, a few milliseconds later.
const ANSWER_SLACK: Duration = Duration::from_millis(500);

struct Pending {
    /// Which request it is, for taking it out of the queue.
    id: u64,
    /// When the request joined the queue.
    queued: Instant,
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
    /// The lane numbers no lane runs under now.
    idle_lanes: Vec<i16>,
    /// When each lane with a batch in flight took it.
    in_flight: HashMap<i16, Instant>,
    /// Lanes waiting for a fuller batch: each will take the queue, so a
    /// request pushed meanwhile needs no new lane.
    gathering: usize,
    /// How long a batch takes, a moving average (zero before the first).
    batch_time: Duration,
}

impl State {
    /// Whether `p` may join the batch that has `taken` so far: none of its
    /// locks busy in another batch (its project's may be, unless
    /// `project_too`) and none of its consumers already in this batch.
    fn free(&self, p: &Pending, taken: &HashSet<Lock>, project_too: bool) -> bool {
        p.locks().all(|l| {
            let busy = self.busy.contains_key(&l) && (project_too || !matches!(l, Lock::Project(_)));
            !busy && !matches!(l, Lock::Consumer(_) if taken.contains(&l))
        })
    }

    /// Until when a lane about to take a batch at `now`, having waited
    /// since `began`, waits for more requests: none (take now) when no
    /// batch is in flight, the queue is empty (nothing to wait with) or
    /// holds a full batch; otherwise until the latest batch in flight is
    /// halfway, and no later than `most` after `began`.
    fn gather_until(&self, began: Instant, now: Instant, most: Duration) -> Option<Instant> {
        if self.queue.is_empty() || self.queue.len() >= MAX_BATCH {
            return None;
        }
        let latest = self.in_flight.values().max()?;
        let halfway = latest.checked_add(self.batch_time.checked_div(2)?)?;
        let until = began.checked_add(most).map_or(halfway, |bound| halfway.min(bound));
        (until > now).then_some(until)
    }
}

/// The queue of claims waiting for a lane.
pub(crate) struct Claims {
    state: Mutex<State>,
    lanes: Arc<Semaphore>,
    /// How many lanes there are.
    count: usize,
    /// Longest a lane waits for a fuller batch.
    gather: Duration,
    /// Told of every request pushed and every batch ended, for the lanes
    /// that wait for a fuller batch.
    changed: Notify,
    /// The next request's [`Pending::id`].
    next_id: AtomicU64,
}

impl Claims {
    pub(crate) fn new(lanes: usize, gather: Duration) -> Claims {
        let lanes = lanes.clamp(1, usize::from(i16::MAX.unsigned_abs()) - 1);
        // Lanes are numbered from 1: stripe 0 is every other writer's.
        let idle_lanes = (1..=lanes).rev().map(|n| i16::try_from(n).expect("clamped")).collect();
        Claims {
            state: Mutex::new(State { idle_lanes, ..State::default() }),
            lanes: Arc::new(Semaphore::new(lanes)),
            count: lanes,
            gather,
            changed: Notify::new(),
            next_id: AtomicU64::new(0),
        }
    }

    pub(crate) fn lanes(&self) -> usize {
        self.count
    }

    pub(crate) fn longest_gather(&self) -> Duration {
        self.gather
    }

    /// Decides one request, together with whatever else is waiting.
    pub(crate) async fn submit(
        &self,
        store: &Store,
        meta: &EventMeta,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<Decision, Error> {
        let (reply, mut answer) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let gathering = {
            let mut state = self.state.lock().expect("claims");
            state.queue.push_back(Pending { id, queued: Instant::now(), meta: meta.clone(), consumers, reply });
            state.gathering > 0
        };
        self.changed.notify_waiters();
        // A lane waiting for a fuller batch takes this one too, at the
        // latest when its wait ends.
        if !gathering {
            self.start_lane(store);
        }
        // Behind a batch stalled on the database, a claim would wait out
        // that batch's deadline and then its own: it is answered within
        // one, with a little over for its batch to answer first.
        let answered = match store.deadline() {
            Some(d) => tokio::time::timeout(d.saturating_add(ANSWER_SLACK), &mut answer).await.ok(),
            None => Some((&mut answer).await),
        };
        match answered {
            Some(a) => a.map_err(|_| Error::internal("the batch deciding this claim ended without an answer"))?,
            None => self.withdraw(id, answer),
        }
    }

    /// Answers request `id`, unanswered within the deadline: taken out of
    /// the queue if it is still there (nothing written), else its batch is
    /// still in flight and may commit yet (the outcome is unknown).
    fn withdraw(&self, id: u64, mut answer: oneshot::Receiver<Result<Decision, Error>>) -> Result<Decision, Error> {
        answer.close();
        let queued = {
            let mut state = self.state.lock().expect("claims");
            let before = state.queue.len();
            state.queue.retain(|p| p.id != id);
            state.queue.len() < before
        };
        // Its batch may have answered since.
        if let Ok(decided) = answer.try_recv() {
            return decided;
        }
        Err(if queued {
            Error::unavailable("database: no claim lane was free within the deadline")
        } else {
            let detail = "database: the claim's batch did not end within the deadline";
            Error::new(ErrorKind::Unavailable, ErrorCode::OutcomeUnknown, detail)
        })
    }

    /// Starts a lane if one is free. Every request pushed is followed by
    /// this call unless a lane is waiting for a fuller batch (it takes the
    /// queue when its bounded wait ends), and a lane only stops after
    /// finding the queue empty with its permit given back, so no request
    /// is left waiting with no lane.
    fn start_lane(&self, store: &Store) {
        if let Ok(permit) = self.lanes.clone().try_acquire_owned() {
            let lane = self.state.lock().expect("claims").idle_lanes.pop().expect("a number for every permit");
            // Each lane writes its own stripe of the projects' sums.
            tokio::spawn(crate::projection::STRIPE.scope(lane, drain(store.clone(), permit, lane)));
        }
    }

    /// Waits, as [`State::gather_until`] says, for a fuller batch before
    /// the lane takes one; woken by each request pushed and batch ended.
    async fn gather(&self) {
        if self.gather.is_zero() {
            return;
        }
        let began = Instant::now();
        let mut counted = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the look, so no change after it is missed.
            changed.as_mut().enable();
            let until = {
                let mut state = self.state.lock().expect("claims");
                let until = state.gather_until(began, Instant::now(), self.gather);
                match (until.is_some(), counted) {
                    (true, false) => state.gathering += 1,
                    (false, true) => state.gathering -= 1,
                    _ => {}
                }
                until
            };
            counted = until.is_some();
            let Some(until) = until else { return };
            let _ = tokio::time::timeout_at(until, changed).await;
        }
    }

    /// The next batch: waiting requests in arrival order, never two naming
    /// the same consumer. Requests naming a consumer, provider or project
    /// that a batch in flight locks are left for later while others wait
    /// (they would only wait for that batch in the database); when only
    /// such requests wait, those whose project alone is busy are taken all
    /// the same (one busy project must not leave the other lanes idle, and
    /// each lane adds to its own stripe of the project's sums), while a
    /// request naming a busy consumer or provider waits for the lane that
    /// holds it, which takes it next. Marks what the batch locks as busy.
    fn take(&self, lane: i16) -> (Vec<Pending>, Vec<Lock>) {
        let mut state = self.state.lock().expect("claims");
        let mut batch = Vec::new();
        let mut taken: HashSet<Lock> = HashSet::new();
        for project_too in [true, false] {
            let mut i = 0;
            while i < state.queue.len() && batch.len() < MAX_BATCH {
                if !state.free(&state.queue[i], &taken, project_too) {
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
        if !batch.is_empty() {
            state.in_flight.insert(lane, Instant::now());
        }
        (batch, taken)
    }

    /// Ends the lane's batch: frees what it locked and counts how long it took.
    fn release(&self, lane: i16, locks: Vec<Lock>) {
        let mut state = self.state.lock().expect("claims");
        if let Some(began) = state.in_flight.remove(&lane) {
            // A moving average over about eight batches.
            let sum = state.batch_time.saturating_mul(7).saturating_add(began.elapsed());
            state.batch_time = sum.checked_div(8).unwrap_or_default();
        }
        for l in locks {
            if let Some(n) = state.busy.get_mut(&l) {
                *n -= 1;
                if *n == 0 {
                    state.busy.remove(&l);
                }
            }
        }
        drop(state);
        self.changed.notify_waiters();
    }

    fn is_empty(&self) -> bool {
        self.state.lock().expect("claims").queue.is_empty()
    }
}

/// A lane: decides batches until the queue is empty.
async fn drain(store: Store, permit: OwnedSemaphorePermit, lane: i16) {
    loop {
        store.claims.gather().await;
        let (batch, locks) = store.claims.take(lane);
        if batch.is_empty() {
            break;
        }
        decide(&store, batch).await;
        store.claims.release(lane, locks);
    }
    store.claims.state.lock().expect("claims").idle_lanes.push(lane);
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
    let started = Instant::now();
    metrics::histogram!("berth_claim_batch_size").record(batch.len() as f64);
    let waited = metrics::histogram!("berth_claim_lane_wait_seconds");
    for p in &batch {
        waited.record(started.saturating_duration_since(p.queued).as_secs_f64());
    }
    let requests: Vec<Request<'_>> = batch.iter().map(|p| Request { meta: &p.meta, consumers: &p.consumers }).collect();
    let outcome = crate::tx::pipelined!(store, |tx| { write_allocations(tx, &requests).await });
    metrics::histogram!("berth_claim_batch_seconds").record(started.elapsed().as_secs_f64());
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
        // The database's failure, not a request's: each alone would wait
        // out the same outage in turn, and a batch whose COMMIT went
        // unanswered may have been written (each request says so).
        Err(e) if e.kind == ErrorKind::Unavailable => {
            for p in batch {
                let _ = p.reply.send(Err(e.clone()));
            }
        }
        Err(_) => {
            for p in batch {
                let request = [Request { meta: &p.meta, consumers: &p.consumers }];
                let outcome = crate::tx::pipelined!(store, |tx| { write_allocations(tx, &request).await });
                let _ = p.reply.send(outcome.map(|d| d.into_iter().next().expect("one decision per request")));
            }
        }
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
