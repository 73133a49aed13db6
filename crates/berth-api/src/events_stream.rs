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
use berth_app::changes::{Read, Watch};
use berth_app::log::Cursor;
use berth_app::App;
use berth_core::error::ErrorCode;
use berth_core::lease::{LeaseEventStatus, LeaseEventType};
use futures::Stream;
use uuid::Uuid;

use crate::auth::Context;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::events::LeaseEventDetail;
use crate::gate::{app, caller};
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

fn bad(m: String) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, m)
}

/// The filters, as `GET /v1/events` takes them, and what the caller may watch.
fn watch(state: &AppState, ctx: &Context, q: &HashMap<String, String>) -> Result<Watch, ApiError> {
    let c = caller(state, ctx);
    let may = c.may(berth_app::Rule::EventsList)?;
    if let Some(k) = q.keys().find(|k| !["after", "lease_id", "status", "event_type"].contains(&k.as_str())) {
        return Err(bad(format!("unknown parameter {k:?} (after, lease_id, status, event_type)")));
    }
    let status = q.get("status").map(|s| {
        LeaseEventStatus::parse(&s.to_ascii_uppercase())
            .ok_or_else(|| bad(format!("status {s:?} is not UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED")))
    });
    let event_type = q.get("event_type").map(|t| {
        LeaseEventType::parse(t)
            .ok_or_else(|| bad(format!("event_type {t:?} is not start_lease, before_end_lease or end_lease")))
    });
    let lease = q.get("lease_id").map(|l| Uuid::parse_str(l).map_err(|_| bad(format!("lease_id {l:?} is not an id"))));
    Ok(app(state).changes().watch(&c, may, lease.transpose()?, status.transpose()?, event_type.transpose()?))
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
    let watch = watch(&state, &ctx, &q)?;
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).or(q.get("after").map(String::as_str));
    let after = match resume.map(str::trim) {
        None | Some("") => app(&state).changes().now().await?,
        Some(s) => {
            s.parse::<Cursor>().map_err(|e| ApiError::bad_request(berth_core::error::ErrorCode::Invalid, e.detail))?
        }
    };
    let slot = streams.open(&ctx.user_id, config.max_streams_per_caller, config.max_streams)?;
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(config.stream_keepalive_s));
    let tail = Tail { app: app(&state), watch, after, buffered: VecDeque::from([start(after)]), _slot: slot };
    Ok(Sse::new(tail.stream()).keep_alive(keep_alive))
}

/// The first message: the cursor the stream starts after.
fn start(after: Cursor) -> StreamEvent {
    StreamEvent { event: Some("start".to_string()), id: Some(after.to_string()), data: "{}".to_string() }
}

/// A live stream of lease event changes: where it is in the log, what it
/// read and has not sent yet, and the slot it holds while it lives.
struct Tail {
    app: App,
    watch: Watch,
    after: Cursor,
    buffered: VecDeque<StreamEvent>,
    _slot: Slot,
}

impl Tail {
    /// `start`, then the changes after `after` until shutdown.
    fn stream(self) -> impl Stream<Item = Result<SseEvent, Infallible>> {
        futures::stream::unfold(self, |mut tail| async move { Some((Ok(tail.next().await?), tail)) })
    }

    /// The next message; `None` once the server closes.
    async fn next(&mut self) -> Option<SseEvent> {
        let mut closing = crate::log::closing().subscribe();
        loop {
            if *closing.borrow_and_update() {
                return None;
            }
            if let Some(ev) = self.buffered.pop_front() {
                return Some(ev.sse());
            }
            match self.app.changes().after(&self.watch, self.after, PAGE).await {
                Ok(read) => self.keep(read, &mut closing).await,
                Err(e) => {
                    tracing::warn!(error = ?e, "lease event stream");
                    tokio::time::sleep(TAIL_INTERVAL * 4).await;
                }
            }
        }
    }

    /// Buffers what a read found, each entry's last row carrying its cursor
    /// (resuming after it skips none of the entry); waits a moment when
    /// caught up, or longer when the read stopped at an error (that entry
    /// is read again, never skipped).
    async fn keep(&mut self, read: Read, closing: &mut tokio::sync::watch::Receiver<bool>) {
        for changed in read.entries {
            self.after = changed.cursor;
            let n = changed.rows.len();
            for (i, r) in changed.rows.iter().enumerate() {
                let data = serde_json::to_string(&LeaseEventDetail::of(r)).unwrap_or_default();
                let id = (i + 1 == n).then(|| self.after.to_string());
                self.buffered.push_back(StreamEvent { event: None, id, data });
            }
        }
        if let Some(e) = read.error {
            tracing::warn!(error = ?e, "lease event stream");
            tokio::time::sleep(TAIL_INTERVAL * 4).await;
        } else if self.buffered.is_empty() && read.caught_up {
            tokio::select! {
                _ = tokio::time::sleep(TAIL_INTERVAL) => {}
                _ = closing.changed() => {}
            }
        }
    }
}
