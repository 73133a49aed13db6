//! `GET /v1/events/stream`: lease events as they change, live, as
//! Server-Sent Events. It follows the log (with the log's cursor, so it
//! never skips a change) and, for each change to a lease event the caller
//! may see, sends that event as `GET /v1/events` shows one, as the change
//! left it (a claim shows IN_PROGRESS even when the outcome followed at
//! once; a lease's creation shows its events as they were made, even read
//! after they ran), the entry's cursor as its `id`. The first message
//! (`event: start`) carries the cursor it starts after, so a client that
//! reconnects before any change resumes there too (`Last-Event-ID` or
//! `after`). Without a cursor it starts at the log's horizon: changes from
//! now on, and perhaps a few just before that a transaction still running
//! held back (each shown as it left the event, so in order).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::routing::get;
use axum::{Extension, Router};
use berth_core::error::ErrorCode;
use berth_core::lease::{LeaseEventStatus, LeaseEventStatus as S, LeaseEventType, LeaseRecord};
use berth_core::Event;
use berth_store::queries::lease_events::{LeaseEventFilter, LeaseEventRow};
use berth_store::{Cursor, RecordedEvent, Store};
use chrono::{DateTime, Utc};
use futures::Stream;
use uuid::Uuid;

use crate::access::{Action, Target};
use crate::auth::Context;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::events::LeaseEventDetail;
use crate::streams::{Slot, StreamEvent, Streams};
use crate::tags;
use crate::AppState;

/// The document of this route.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(stream))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

/// The live route, which no request timeout bounds.
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/events/stream", get(stream))
}

/// How often the stream looks at the log when caught up.
const TAIL_INTERVAL: Duration = Duration::from_millis(250);
const PAGE: i64 = 500;

/// The log entries that change a lease event's row (a renewed claim only
/// moves its expiry, and is left out).
const KINDS: &[&str] = &[
    "LeaseCreated",
    "LeaseUpdated",
    "LeaseEventChanged",
    "LeaseEventClaimed",
    "LeaseEventRetrying",
    "LeaseEventFinished",
    "LeaseEventRetried",
    "LeaseEventCancelled",
    "LeaseEventFired",
];

/// Which lease events a stream sends.
#[derive(Clone, Default)]
struct Watch {
    /// Only this project's (None: every project's, for admins).
    project: Option<String>,
    lease: Option<Uuid>,
    status: Option<LeaseEventStatus>,
    event_type: Option<LeaseEventType>,
}

impl Watch {
    /// The lease events entry `e` changed, as it left them, that pass.
    /// An error is the database's (the entry must be read again, not
    /// skipped); an event gone since, or not the caller's, is no row.
    async fn rows(&self, store: &Store, e: &RecordedEvent) -> Result<Vec<LeaseEventRow>, berth_core::Error> {
        if !KINDS.contains(&e.event_type.as_str()) {
            return Ok(Vec::new());
        }
        let lease = e.stream.strip_prefix("lease:").and_then(|l| Uuid::parse_str(l).ok());
        if lease.is_none() || (self.lease.is_some() && lease != self.lease) {
            return Ok(Vec::new());
        }
        let event = e.data.get("event").and_then(|v| v.as_str()).and_then(|s| Uuid::parse_str(s).ok());
        let rows = match event {
            Some(id) => match store.lease_event(id, self.project.as_deref()).await {
                Ok(row) => vec![as_left_by(row, e)],
                Err(err) if err.code == ErrorCode::LeaseEventNotFound => Vec::new(),
                Err(err) => return Err(err),
            },
            // A lease's creation or update, from the lease it carries. A
            // stream starts below the horizon, which a long transaction
            // anywhere on the server holds back, so its first entries may
            // be older than what the caller has seen: as they stand, a
            // creation read late showed its start's outcome before its claim.
            None => match e.event() {
                Ok(Event::LeaseCreated { lease, at }) if self.visible(&lease) => as_created(&lease, at),
                Ok(Event::LeaseUpdated { lease, at }) if self.visible(&lease) => {
                    let f = LeaseEventFilter {
                        project_id: self.project.clone(),
                        lease_id: Some(lease.id),
                        ..Default::default()
                    };
                    as_updated(&lease, at, store.lease_events(&f).await?)
                }
                _ => Vec::new(),
            },
        };
        Ok(rows
            .into_iter()
            .filter(|r| self.status.is_none_or(|s| s.as_str() == r.status))
            .filter(|r| self.event_type.is_none_or(|t| t.as_str() == r.event_type))
            .collect())
    }

    /// Whether the caller may see `lease`'s events.
    fn visible(&self, lease: &LeaseRecord) -> bool {
        self.project.as_ref().is_none_or(|p| *p == lease.project_id)
    }
}

/// `lease`'s events as its creation made them: nothing run yet.
fn as_created(lease: &LeaseRecord, at: DateTime<Utc>) -> Vec<LeaseEventRow> {
    lease
        .events
        .iter()
        .map(|e| LeaseEventRow {
            id: e.id,
            lease_id: lease.id,
            lease_name: lease.name.clone(),
            project_id: lease.project_id.clone(),
            event_type: e.event_type.as_str().to_string(),
            time: e.time,
            status: e.status.as_str().to_string(),
            attempts: 0,
            last_error: None,
            claimed_by: None,
            claim_expires_at: None,
            retry_at: None,
            created_at: at,
            updated_at: at,
        })
        .collect()
}

/// `lease`'s events as its update left them: an update moves only their
/// times (and the lease's name); the rest, which the manager writes, as it
/// stands in `current`. An event gone since shows as the update carried it.
fn as_updated(lease: &LeaseRecord, at: DateTime<Utc>, current: Vec<LeaseEventRow>) -> Vec<LeaseEventRow> {
    let mut current: HashMap<Uuid, LeaseEventRow> = current.into_iter().map(|r| (r.id, r)).collect();
    as_created(lease, at)
        .into_iter()
        .map(|made| match current.remove(&made.id) {
            Some(now) => LeaseEventRow { time: made.time, lease_name: made.lease_name, ..now },
            None => made,
        })
        .collect()
}

/// `row` as entry `e` left it: the fields the entry changed, from the
/// entry; the others (lease, type, time) as they stand.
fn as_left_by(mut row: LeaseEventRow, e: &RecordedEvent) -> LeaseEventRow {
    let Ok(event) = Event::from_parts(&e.event_type, e.data.clone()) else {
        return row;
    };
    match event {
        Event::LeaseEventClaimed { attempt, claimed_by, claim_expires_at, at, .. } => {
            (row.status, row.attempts, row.claimed_by) = (S::InProgress.as_str().into(), attempt, Some(claimed_by));
            (row.claim_expires_at, row.updated_at) = (Some(claim_expires_at), at);
        }
        Event::LeaseEventRetrying { attempt, error, retry_at, at, .. } => {
            (row.status, row.attempts, row.last_error) = (S::Undone.as_str().into(), attempt, Some(error));
            (row.retry_at, row.claim_expires_at, row.updated_at) = (Some(retry_at), None, at);
        }
        Event::LeaseEventFinished { attempt, status, error, at, .. } => {
            (row.status, row.attempts, row.last_error) = (status.as_str().into(), attempt, error.or(row.last_error));
            (row.retry_at, row.claim_expires_at, row.updated_at) = (None, None, at);
        }
        Event::LeaseEventRetried { at, .. } => {
            (row.status, row.attempts, row.claimed_by) = (S::Undone.as_str().into(), 0, None);
            (row.retry_at, row.claim_expires_at, row.updated_at) = (Some(at), None, at);
        }
        Event::LeaseEventCancelled { at, .. } => {
            (row.status, row.retry_at, row.updated_at) = (S::Cancelled.as_str().into(), None, at);
        }
        Event::LeaseEventFired { at, .. } => (row.retry_at, row.updated_at) = (Some(at), at),
        Event::LeaseEventChanged { status, attempts, last_error, claimed_by, claim_expires_at, at, .. } => {
            (row.status, row.attempts, row.last_error) = (status.as_str().into(), attempts, last_error);
            (row.claimed_by, row.claim_expires_at, row.updated_at) = (claimed_by, claim_expires_at, at);
        }
        _ => {}
    }
    row
}

fn bad(m: String) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, m)
}

/// The filters, as `GET /v1/events` takes them.
fn watch(state: &AppState, ctx: &Context, q: &HashMap<String, String>) -> Result<Watch, ApiError> {
    for k in q.keys() {
        if !["after", "lease_id", "status", "event_type"].contains(&k.as_str()) {
            return Err(bad(format!("unknown parameter {k:?} (after, lease_id, status, event_type)")));
        }
    }
    let status = q
        .get("status")
        .map(|s| {
            LeaseEventStatus::parse(&s.to_ascii_uppercase())
                .ok_or_else(|| bad(format!("status {s:?} is not UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED")))
        })
        .transpose()?;
    let event_type = q
        .get("event_type")
        .map(|t| {
            LeaseEventType::parse(t)
                .ok_or_else(|| bad(format!("event_type {t:?} is not start_lease, before_end_lease or end_lease")))
        })
        .transpose()?;
    let lease = q
        .get("lease_id")
        .map(|l| Uuid::parse_str(l).map_err(|_| bad(format!("lease_id {l:?} is not an id"))))
        .transpose()?;
    let project = state.rules.visible_project(ctx, Action::EventsAllProjects).map(str::to_string);
    Ok(Watch { project, lease, status, event_type })
}

#[utoipa::path(
    get,
    path = "/v1/events/stream",
    tag = tags::ADDITIONS,
    summary = "Lease events as they change, live, as Server-Sent Events, resumable; own project's",
    params(
        ("after" = Option<String>, Query, description = "A log cursor to start after (default: now)"),
        ("lease_id" = Option<String>, Query, description = "One lease's"),
        ("status" = Option<String>, Query, description = "UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED"),
        ("event_type" = Option<String>, Query, description = "start_lease, before_end_lease or end_lease"),
    ),
    responses(
        (status = 200, description = "`start` with the cursor, then each changed lease event as `GET /v1/events` shows one; `Last-Event-ID` resumes", body = crate::streams::StreamEvent, content_type = "text/event-stream"),
    ),
)]
async fn stream(
    State(state): State<AppState>,
    Extension(config): Extension<Arc<ApiConfig>>,
    Extension(streams): Extension<Arc<Streams>>,
    ctx: Context,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    state.rules.authorize(&ctx, Action::EventsList, &Target::own(&ctx))?;
    let watch = watch(&state, &ctx, &q)?;
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).or(q.get("after").map(String::as_str));
    let after = match resume.map(str::trim) {
        None | Some("") => state.store.log_now().await?,
        Some(s) => {
            s.parse::<Cursor>().map_err(|e| ApiError::bad_request(berth_core::error::ErrorCode::Invalid, e.detail))?
        }
    };
    let slot = streams.open(&ctx.user_id, config.max_streams_per_caller, config.max_streams)?;
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(config.stream_keepalive_s));
    Ok(Sse::new(follow(state.store.clone(), after, watch, slot)).keep_alive(keep_alive))
}

/// `start`, then the changes after `after` until shutdown. The stream
/// holds its `slot` while it lives.
fn follow(store: Store, after: Cursor, watch: Watch, slot: Slot) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let start = StreamEvent { event: Some("start".to_string()), id: Some(after.to_string()), data: "{}".to_string() };
    let buffered = VecDeque::from([start]);
    futures::stream::unfold((store, after, buffered, slot), move |(store, mut after, mut buffered, slot)| {
        let watch = watch.clone();
        let mut closing = crate::log::closing().subscribe();
        async move {
            loop {
                if *closing.borrow_and_update() {
                    return None;
                }
                if let Some(ev) = buffered.pop_front() {
                    return Some((Ok(ev.sse()), (store, after, buffered, slot)));
                }
                match store.read_log(after, PAGE).await {
                    Ok(page) => {
                        let full = page.len() as i64 == PAGE;
                        for e in &page {
                            let rows = match watch.rows(&store, e).await {
                                Ok(rows) => rows,
                                // Read again from this entry after a pause, never skipped.
                                Err(err) => {
                                    tracing::warn!(error = %err, "lease event stream");
                                    tokio::time::sleep(TAIL_INTERVAL * 4).await;
                                    break;
                                }
                            };
                            after = e.cursor();
                            let n = rows.len();
                            for (i, r) in rows.iter().enumerate() {
                                let data = serde_json::to_string(&LeaseEventDetail::of(r)).unwrap_or_default();
                                // Resuming after an entry's last row skips none of the entry.
                                let id = (i + 1 == n).then(|| after.to_string());
                                buffered.push_back(StreamEvent { event: None, id, data });
                            }
                        }
                        if buffered.is_empty() && !full {
                            tokio::select! {
                                _ = tokio::time::sleep(TAIL_INTERVAL) => {}
                                _ = closing.changed() => {}
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "lease event stream");
                        tokio::time::sleep(TAIL_INTERVAL * 4).await;
                    }
                }
            }
        }
    })
}
