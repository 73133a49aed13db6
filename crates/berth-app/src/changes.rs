//! Lease events as they change: the log read from a cursor and, for each
//! entry that changed a lease event the caller may see, that event as the
//! entry left it (a claim shows IN_PROGRESS even when the outcome followed
//! at once; a lease's creation shows its events as they were made, even
//! read after they ran). A live stream of them is the edge's to send.

use std::collections::HashMap;

use berth_core::error::ErrorCode;
use berth_core::lease::{LeaseEventStatus, LeaseEventStatus as S, LeaseEventType, LeaseRecord};
use berth_core::Event;
use berth_store::queries::lease_events::{LeaseEventFilter, LeaseEventRow};
use berth_store::{Cursor, RecordedEvent, Store};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Allowed, App, Caller, Error, Rule};

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

/// Which lease events a watcher is sent: made by [`Changes::watch`], which
/// asked whether the caller may list events and which projects it sees.
#[derive(Clone)]
pub struct Watch {
    /// Only this project's (None: every project's).
    project: Option<String>,
    lease: Option<Uuid>,
    status: Option<LeaseEventStatus>,
    event_type: Option<LeaseEventType>,
}

/// One log entry read, and the lease events it changed that a watch passes.
pub struct Changed {
    /// The entry's cursor: reading after it skips none of it.
    pub cursor: Cursor,
    pub rows: Vec<LeaseEventRow>,
}

/// A read of changes: the entries read in log order, whether the read came
/// short of the limit (caught up), and the error that stopped it at the
/// entry after the last one here (that entry must be read again, never
/// skipped).
pub struct Read {
    pub entries: Vec<Changed>,
    pub caught_up: bool,
    pub error: Option<Error>,
}

/// The change-watching use cases, over one [`App`].
pub struct Changes<'a> {
    app: &'a App,
}

impl Changes<'_> {
    /// What the caller may watch (it may list events), narrowed to one
    /// lease, status or type: its own project's events unless it sees
    /// every project's.
    pub fn watch(
        &self,
        caller: &Caller<'_>,
        a: Allowed,
        lease: Option<Uuid>,
        status: Option<LeaseEventStatus>,
        event_type: Option<LeaseEventType>,
    ) -> Watch {
        debug_assert_eq!(a.0, Rule::EventsList);
        let project = caller.visible_project(Rule::EventsAllProjects).map(str::to_string);
        Watch { project, lease, status, event_type }
    }

    /// Where "from now on" starts: the log's horizon.
    pub async fn now(&self) -> Result<Cursor, Error> {
        Ok(self.app.store.log_now().await?)
    }

    /// The changes `watch` passes among at most `limit` entries after `after`.
    pub async fn after(&self, watch: &Watch, after: Cursor, limit: i64) -> Result<Read, Error> {
        let page = self.app.store.read_log(after, limit).await?;
        let caught_up = (page.len() as i64) < limit;
        let mut entries = Vec::with_capacity(page.len());
        for e in &page {
            match watch.rows(&self.app.store, e).await {
                Ok(rows) => entries.push(Changed { cursor: e.cursor(), rows }),
                Err(error) => return Ok(Read { entries, caught_up: false, error: Some(error.into()) }),
            }
        }
        Ok(Read { entries, caught_up, error: None })
    }
}

impl Watch {
    /// The lease events entry `e` changed, as it left them, that pass.
    /// An error is the database's; an event gone since, or not the
    /// watcher's, is no row.
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
            // read starts below the horizon, which a long transaction
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

    /// Whether the watcher may see `lease`'s events.
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

impl App {
    /// The change-watching use cases.
    pub fn changes(&self) -> Changes<'_> {
        Changes { app: self }
    }
}
