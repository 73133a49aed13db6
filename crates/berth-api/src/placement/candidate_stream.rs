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

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use berth_store::queries::candidates::{Candidate, CandidateSearch, ProviderSummary};
use berth_store::Store;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::microversion::Version;

/// Bytes gathered before a chunk is sent.
const CHUNK: usize = 64 * 1024;
/// Chunks waiting for the client before the walk pauses.
const QUEUED: usize = 4;

type Chunk = Result<Bytes, std::io::Error>;

/// The answer's body: the walk of `search`, then its summaries.
pub fn body(store: Store, search: CandidateSearch, v: Version) -> Body {
    let (tx, mut rx) = mpsc::channel::<Chunk>(QUEUED);
    tokio::spawn(write(store, Arc::new(search), v, tx));
    Body::from_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

async fn write(store: Store, search: Arc<CandidateSearch>, v: Version, tx: mpsc::Sender<Chunk>) {
    let walking = {
        let (search, tx) = (search.clone(), tx.clone());
        tokio::task::spawn_blocking(move || walk(&search, v, &tx))
    };
    let Ok(Some((used, mut buf))) = walking.await else { return };
    let summaries = match store.candidate_summaries(&search, &used).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "reading provider summaries mid-answer; the answer is cut short");
            let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
            return;
        }
    };
    buf.extend_from_slice(b"],\"provider_summaries\":");
    serde_json::to_writer(&mut buf, &summaries_json(v, &summaries)).expect("a JSON value writes to memory");
    buf.push(b'}');
    let _ = tx.send(Ok(buf.into())).await;
}

/// The walk, on a blocking thread: the allocation requests in chunks; the
/// providers used and what is left to send, or `None` once the client has
/// gone.
fn walk(search: &CandidateSearch, v: Version, tx: &mpsc::Sender<Chunk>) -> Option<(BTreeSet<Uuid>, Vec<u8>)> {
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
            if tx.blocking_send(Ok(chunk.into())).is_err() {
                gone = true;
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
            map.serialize_entry(provider, &Resources { resources })?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Resources<'a> {
    resources: &'a BTreeMap<String, i64>,
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
            resources: &'a BTreeMap<String, i64>,
        }
        s.collect_seq(self.0.iter().map(|(uuid, resources)| Entry { resource_provider: Provider { uuid }, resources }))
    }
}

/// Provider summaries: capacity and usage of each class, traits from 1.17,
/// the tree from 1.29.
fn summaries_json(v: Version, summaries: &BTreeMap<Uuid, ProviderSummary>) -> Value {
    let shown: Map<String, Value> = summaries
        .iter()
        .map(|(p, s)| {
            let resources: Map<String, Value> = s
                .resources
                .iter()
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
