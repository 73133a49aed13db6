//! The event log over HTTP (`berth:log:read`: admin by default): `GET /v1/log?after=CURSOR&limit=N`
//! pages through it (`?last=N`: its last entries, as `tail` shows them),
//! `GET /v1/log/stream` follows it live as Server-Sent
//! Events, resumable with `Last-Event-ID` and filterable by stream, type and
//! lease.
//!
//! Both read with the store's cursor (`TXID-POSITION`), which never skips
//! an entry even when transactions commit out of position order.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::routing::get;
use axum::{Extension, Json, Router};
use berth_app::log::{Cursor, RecordedEvent};
use berth_app::{Allowed, App, Rule};
use berth_core::error::ErrorCode;
use futures::Stream;
use serde_json::Value;

use crate::auth::Context;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::streams::{Slot, StreamEvent, Streams};
use crate::tags;
use crate::AppState;

/// How often a live tail looks for new entries: a write shows within this
/// (plus the time to read it).
const TAIL_INTERVAL: Duration = Duration::from_millis(250);
const PAGE: i64 = 500;

/// Set when the server shuts down: live tails end so the graceful shutdown
/// does not wait on them forever.
static CLOSING: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> = std::sync::OnceLock::new();

pub(crate) fn closing() -> &'static tokio::sync::watch::Sender<bool> {
    CLOSING.get_or_init(|| tokio::sync::watch::channel(false).0)
}

/// Ends every live tail (call when the server starts shutting down).
pub fn close_streams() {
    closing().send_replace(true);
}

/// The document of these routes.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    #[derive(utoipa::OpenApi)]
    #[openapi(paths(page, stream))]
    struct Doc;
    <Doc as utoipa::OpenApi>::openapi()
}

/// An entry as [`entry_json`] shows it.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct LogEntry {
    cursor: String,
    position: i64,
    stream: String,
    version: i64,
    #[serde(rename = "type")]
    event_type: String,
    data: Value,
    meta: Value,
    recorded_at: String,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct LogPage {
    entries: Vec<LogEntry>,
    /// The cursor to ask after next.
    next: String,
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/log", get(page))
}

/// The live tail, which no request timeout bounds.
pub fn stream_routes() -> Router<AppState> {
    Router::new().route("/v1/log/stream", get(stream))
}

fn bad(m: String) -> ApiError {
    ApiError::bad_request(ErrorCode::Invalid, m)
}

fn cursor(s: Option<&str>) -> Result<Cursor, ApiError> {
    match s.map(str::trim) {
        None | Some("") => Ok(Cursor::START),
        Some(s) => s.parse::<Cursor>().map_err(|e| bad(e.detail)),
    }
}

fn entry_json(e: &RecordedEvent) -> LogEntry {
    LogEntry {
        cursor: e.cursor().to_string(),
        position: e.position,
        stream: e.stream.clone(),
        version: e.version,
        event_type: e.event_type.clone(),
        data: e.data.clone(),
        meta: e.meta.clone(),
        recorded_at: berth_core::dates::format_date(e.recorded_at),
    }
}

#[utoipa::path(
    get,
    path = "/v1/log",
    tag = tags::ADDITIONS,
    summary = "The event log after a cursor, in pages (admin)",
    params(
        ("after" = Option<String>, Query, description = "A cursor (`TXID-POSITION`); default the start"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 10000, description = "At most this many (default 500)"),
        ("last" = Option<u32>, Query, minimum = 1, maximum = 10000, description = "Instead of `after` and `limit`: the log's last this many entries; `next` follows on from them"),
    ),
    responses(
        (status = 200, description = "A page of entries and the cursor after them", body = LogPage),
    ),
)]
async fn page(
    State(state): State<AppState>,
    ctx: Context,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<LogPage>, ApiError> {
    let may = caller(&state, &ctx).may(Rule::LogRead)?;
    let after = cursor(q.get("after").map(String::as_str))?;
    let count = |key: &str| match q.get(key).map(|l| (l, l.parse::<i64>())) {
        None => Ok(None),
        Some((_, Ok(n))) if (1..=10_000).contains(&n) => Ok(Some(n)),
        Some((l, _)) => Err(bad(format!("{key} {l:?} must be a whole number from 1 to 10000"))),
    };
    let (limit, last) = (count("limit")?, count("last")?);
    if last.is_some() && (q.contains_key("after") || limit.is_some()) {
        return Err(bad("last is instead of after and limit: give one or the other".into()));
    }
    let entries = match last {
        Some(n) => app(&state).log().last(may, n).await?,
        None => app(&state).log().page(may, after, limit.unwrap_or(PAGE)).await?,
    };
    let next = entries.last().map(|e| e.cursor()).unwrap_or(after);
    Ok(Json(LogPage { entries: entries.iter().map(entry_json).collect(), next: next.to_string() }))
}

/// Which entries a live tail sends.
#[derive(Clone, Default)]
struct Filter {
    stream: Option<String>,
    event_type: Option<String>,
    lease: Option<String>,
}

impl Filter {
    fn wants(&self, e: &RecordedEvent) -> bool {
        self.stream.as_ref().is_none_or(|s| *s == e.stream)
            && self.event_type.as_ref().is_none_or(|t| *t == e.event_type)
            && self.lease.as_ref().is_none_or(|l| e.stream == format!("lease:{l}"))
    }
}

#[utoipa::path(
    get,
    path = "/v1/log/stream",
    tag = tags::ADDITIONS,
    summary = "The event log live, as Server-Sent Events, resumable (admin)",
    params(
        ("after" = Option<String>, Query, description = "A cursor to start after"),
        ("stream" = Option<String>, Query, description = "Only this stream's entries"),
        ("type" = Option<String>, Query, description = "Only entries of this type"),
        ("lease" = Option<String>, Query, description = "Only this lease's entries"),
    ),
    responses(
        (status = 200, description = "Entries as they are written; `Last-Event-ID` resumes", body = crate::streams::StreamEvent, content_type = "text/event-stream"),
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
    let may = caller(&state, &ctx).may(Rule::LogRead)?;
    if let Some(k) = q.keys().find(|k| !["after", "stream", "type", "lease"].contains(&k.as_str())) {
        return Err(bad(format!("unknown parameter {k:?} (after, stream, type, lease)")));
    }
    // Resuming: the last entry the client saw, else where it asked to start.
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let after = cursor(resume.or(q.get("after").map(String::as_str)))?;
    if let Some(l) = q.get("lease") {
        uuid::Uuid::parse_str(l).map_err(|_| bad(format!("lease {l:?} is not an id")))?;
    }
    let filter =
        Filter { stream: q.get("stream").cloned(), event_type: q.get("type").cloned(), lease: q.get("lease").cloned() };
    let slot = streams.open(&ctx.user_id, config.max_streams_per_caller, config.max_streams)?;
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(config.stream_keepalive_s));
    let tail = Tail { app: app(&state), may, after, buffered: VecDeque::new(), filter, _slot: slot };
    Ok(Sse::new(tail.stream()).keep_alive(keep_alive))
}

/// A live tail: where it is in the log, what it read and has not sent
/// yet, which entries it sends, and the slot it holds while it lives.
struct Tail {
    app: App,
    may: Allowed,
    after: Cursor,
    buffered: VecDeque<RecordedEvent>,
    filter: Filter,
    _slot: Slot,
}

impl Tail {
    /// Entries after `after`, until shutdown: read a page, send what passes
    /// the filter, and when caught up wait a moment and look again.
    fn stream(self) -> impl Stream<Item = Result<SseEvent, Infallible>> {
        futures::stream::unfold(self, |mut tail| async move {
            let e = tail.next().await?;
            let data = serde_json::to_string(&entry_json(&e)).unwrap_or_default();
            let ev = StreamEvent { event: None, id: Some(e.cursor().to_string()), data };
            Some((Ok(ev.sse()), tail))
        })
    }

    /// The next entry that passes the filter; `None` once the server closes.
    async fn next(&mut self) -> Option<RecordedEvent> {
        let mut closing = closing().subscribe();
        loop {
            if *closing.borrow_and_update() {
                return None;
            }
            if let Some(e) = self.buffered.pop_front() {
                return Some(e);
            }
            let read = self.app.log().page(self.may, self.after, PAGE).await;
            self.keep(read, &mut closing).await;
        }
    }

    /// Keeps what a read found; waits a moment when caught up, or longer
    /// after an error.
    async fn keep(
        &mut self,
        read: Result<Vec<RecordedEvent>, berth_core::Error>,
        closing: &mut tokio::sync::watch::Receiver<bool>,
    ) {
        match read {
            Ok(page) => {
                let full = page.len() as i64 == PAGE;
                if let Some(last) = page.last() {
                    self.after = last.cursor();
                }
                self.buffered.extend(page.into_iter().filter(|e| self.filter.wants(e)));
                if self.buffered.is_empty() && !full {
                    tokio::select! {
                        _ = tokio::time::sleep(TAIL_INTERVAL) => {}
                        _ = closing.changed() => {}
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "log tail");
                tokio::time::sleep(TAIL_INTERVAL * 4).await;
            }
        }
    }
}
