//! The answer of `GET /allocation_candidates`, written as the search walks:
//! each allocation request is serialized straight to bytes (no JSON tree)
//! and sent in chunks while the walk goes on, on a blocking thread, paced
//! by the client. Memory stays at a few chunks and one hash per candidate,
//! however many candidates the answer holds. The provider summaries, read
//! once the walk knows which providers it used, close the document.
//!
//! Once the first chunk is out the status is 200: a failure after it (the
//! summaries' read) ends the body early, which the client sees as a broken
//! answer, never as a well-formed partial one.
//!
//! The request timeout ends with the handler, before the body is written,
//! so the answer carries its own deadline: a walk that runs past it, or a
//! client that stops reading, is cut short there, and the blocking thread
//! is freed rather than held for as long as a slow client likes.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::body::{Body, Bytes};
use berth_app::placement::candidates::{Candidate, CandidateSearch, Found, ProviderSummary};
use berth_core::names::class_rank;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};
use uuid::Uuid;

use super::microversion::Version;

/// Bytes gathered before a chunk is sent.
const CHUNK: usize = 64 * 1024;
/// Chunks waiting for the client before the walk pauses.
const QUEUED: usize = 4;

type Chunk = Result<Bytes, std::io::Error>;

/// The answer's body: the walk of `found`'s search, then its summaries,
/// all written within `limit` of now.
pub fn body(found: Found, v: Version, limit: Duration) -> Body {
    let (tx, mut rx) = mpsc::channel::<Chunk>(QUEUED);
    let cut = Arc::new(AtomicBool::new(false));
    // Config bounds the timeout; a year caps it here so the sum cannot overflow.
    let limit = limit.min(Duration::from_secs(365 * 86_400));
    let deadline = Instant::now().checked_add(limit).expect("a year from now is a time");
    let out = Out { tx, deadline, cut: cut.clone() };
    tokio::spawn(write(Arc::new(found), v, out));
    Body::from_stream(futures::stream::poll_fn(move |cx| {
        // A cut answer breaks off at once, ahead of the chunks still queued
        // (their client is not reading them anyway).
        if cut.swap(false, Ordering::AcqRel) {
            return Poll::Ready(Some(Err(std::io::Error::other("the answer was cut short"))));
        }
        rx.poll_recv(cx)
    }))
}

/// Where the chunks go, and by when.
#[derive(Clone)]
struct Out {
    tx: mpsc::Sender<Chunk>,
    deadline: Instant,
    /// Set when the answer is cut short.
    cut: Arc<AtomicBool>,
}

impl Out {
    /// Sends `chunk` unless the client has gone or the deadline passes
    /// first; `false` then, and the answer ends there.
    async fn send(&self, chunk: Vec<u8>) -> bool {
        match timeout_at(self.deadline, self.tx.send(Ok(chunk.into()))).await {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                self.cut("the answer ran past the request timeout").await;
                false
            }
        }
    }

    /// Ends the body as broken, so the client cannot take it for whole.
    async fn cut(&self, why: &str) {
        tracing::warn!(why, "allocation candidates' answer cut short");
        self.cut.store(true, Ordering::Release);
        // Wakes the body's reader if it waits on an empty queue; a full
        // queue's reader wakes on its own when it next reads.
        let _ = self.tx.try_send(Err(std::io::Error::other(why.to_owned())));
    }

    fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

async fn write(found: Arc<Found>, v: Version, out: Out) {
    let walking = {
        let (found, out) = (found.clone(), out.clone());
        let handle = Handle::current();
        tokio::task::spawn_blocking(move || walk(&found.search, v, &out, &handle))
    };
    let Ok(Some((used, mut buf))) = walking.await else { return };
    let summaries = match timeout_at(out.deadline, found.summaries(&used)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "reading provider summaries mid-answer; the answer is cut short");
            return out.cut("the provider summaries could not be read").await;
        }
        Err(_) => return out.cut("the answer ran past the request timeout").await,
    };
    buf.extend_from_slice(b"],\"provider_summaries\":");
    serde_json::to_writer(&mut buf, &summaries_json(v, &summaries)).expect("a JSON value writes to memory");
    buf.push(b'}');
    out.send(buf).await;
}

/// The walk, on a blocking thread: the allocation requests in chunks; the
/// providers used and what is left to send, or `None` once the client has
/// gone or the deadline has passed.
fn walk(search: &CandidateSearch, v: Version, out: &Out, handle: &Handle) -> Option<(BTreeSet<Uuid>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(CHUNK + 4096);
    buf.extend_from_slice(b"{\"allocation_requests\":[");
    let mut first = true;
    let mut gone = false;
    let used = search.walk(|c| {
        if !first {
            buf.push(b',');
        }
        first = false;
        write_request(&mut buf, v, c);
        if buf.len() >= CHUNK {
            let chunk = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096));
            // A search that yields few candidates slowly is caught here too:
            // the deadline is looked at once a chunk, not once a candidate.
            if out.past_deadline() {
                handle.block_on(out.cut("the answer ran past the request timeout"));
                gone = true;
            } else if !handle.block_on(out.send(chunk)) {
                gone = true;
            }
            if gone {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    (!gone).then_some((used, buf))
}

/// One allocation request: dict-shaped from 1.12 (with mappings from 1.34),
/// a list of providers before.
fn write_request(buf: &mut Vec<u8>, v: Version, c: &Candidate) {
    let written = if v.dict_allocations() {
        let mappings = v.mappings().then_some(&c.mappings);
        serde_json::to_writer(&mut *buf, &DictRequest { allocations: Dict(&c.allocations), mappings })
    } else {
        serde_json::to_writer(&mut *buf, &ListRequest { allocations: List(&c.allocations) })
    };
    written.expect("an allocation request writes to memory");
}

#[derive(Serialize)]
struct DictRequest<'a> {
    allocations: Dict<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mappings: Option<&'a BTreeMap<String, BTreeSet<Uuid>>>,
}

/// `{provider: {"resources": {class: amount}}}`.
struct Dict<'a>(&'a BTreeMap<Uuid, BTreeMap<String, i64>>);

impl Serialize for Dict<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (provider, resources) in self.0 {
            map.serialize_entry(provider, &Resources { resources: Ranked(resources) })?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Resources<'a> {
    resources: Ranked<'a, i64>,
}

/// Amounts by class, written in Placement's order of classes.
struct Ranked<'a, V>(&'a BTreeMap<String, V>);

impl<V: Serialize> Serialize for Ranked<'_, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(in_class_order(self.0))
    }
}

/// The entries of a map by class, in Placement's order of classes.
fn in_class_order<V>(by_class: &BTreeMap<String, V>) -> Vec<(&String, &V)> {
    let mut v: Vec<(&String, &V)> = by_class.iter().collect();
    v.sort_by(|a, b| class_rank(a.0).cmp(&class_rank(b.0)));
    v
}

#[derive(Serialize)]
struct ListRequest<'a> {
    allocations: List<'a>,
}

/// `[{"resource_provider": {"uuid": provider}, "resources": {...}}]`.
struct List<'a>(&'a BTreeMap<Uuid, BTreeMap<String, i64>>);

impl Serialize for List<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Provider<'a> {
            uuid: &'a Uuid,
        }
        #[derive(Serialize)]
        struct Entry<'a> {
            resource_provider: Provider<'a>,
            resources: Ranked<'a, i64>,
        }
        s.collect_seq(
            self.0
                .iter()
                .map(|(uuid, resources)| Entry { resource_provider: Provider { uuid }, resources: Ranked(resources) }),
        )
    }
}

/// Provider summaries: capacity and usage of each class, traits from 1.17,
/// the tree from 1.29.
fn summaries_json(v: Version, summaries: &BTreeMap<Uuid, ProviderSummary>) -> Value {
    let shown: Map<String, Value> = summaries
        .iter()
        .map(|(p, s)| {
            let resources: Map<String, Value> = in_class_order(&s.resources)
                .into_iter()
                .map(|(c, (capacity, used))| (c.clone(), json!({"capacity": capacity, "used": used})))
                .collect();
            let mut out = json!({"resources": resources});
            if v.candidates_required() {
                out["traits"] = json!(s.traits);
            }
            if v.candidates_nested() {
                out["parent_provider_uuid"] = json!(s.parent);
                out["root_provider_uuid"] = json!(s.root);
            }
            (p.to_string(), out)
        })
        .collect();
    Value::Object(shown)
}
