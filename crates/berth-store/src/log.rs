//! The append-only log.
//!
//! Appending: every event gets the next global `position` (a sequence) and
//! the next `version` of its stream; the unique (stream, version) constraint
//! makes an append at a stale version fail, and a caller may also name the
//! version it expects.
//!
//! Reading: positions come from a sequence, so transactions can commit out of
//! position order, and a reader that only remembered the highest position seen
//! could skip an event committed later below it. The cursor is therefore the
//! pair (transaction id, position), and a read returns only events of
//! transactions older than the oldest transaction still running in its
//! snapshot (`pg_snapshot_xmin`). Everything below that horizon is final:
//! no transaction can commit there any more, so ordering by (txid, position)
//! gives every reader the same order and never skips.

use std::fmt;
use std::str::FromStr;

use berth_core::error::ErrorCode;
use berth_core::{Error, Event, EventMeta};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::GenericClient;

use crate::{Store, StoreError};

/// Where a reader stands in the log. `Cursor::START` is before everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cursor {
    pub txid: u64,
    pub position: i64,
}

impl Cursor {
    pub const START: Cursor = Cursor { txid: 0, position: 0 };
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.txid, self.position)
    }
}

impl FromStr for Cursor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Cursor, Error> {
        let bad = || Error::invalid(ErrorCode::Invalid, format!("cursor {s:?} is not of the form TXID-POSITION"));
        let (t, p) = s.split_once('-').ok_or_else(bad)?;
        Ok(Cursor { txid: t.parse().map_err(|_| bad())?, position: p.parse().map_err(|_| bad())? })
    }
}

/// An event as the log holds it.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedEvent {
    pub position: i64,
    #[serde(skip)]
    pub txid: u64,
    pub stream: String,
    pub version: i64,
    #[serde(rename = "type")]
    pub event_type: String,
    pub data: serde_json::Value,
    pub meta: serde_json::Value,
    pub recorded_at: DateTime<Utc>,
}

impl RecordedEvent {
    pub fn cursor(&self) -> Cursor {
        Cursor { txid: self.txid, position: self.position }
    }

    pub fn event(&self) -> Result<Event, serde_json::Error> {
        Event::from_parts(&self.event_type, self.data.clone())
    }
}

/// Appends `events` in order, in the caller's transaction. Each event's
/// stream version is the stream's next one. Returns their positions.
pub(crate) async fn append(
    tx: &impl crate::client::GenericClient,
    meta: &EventMeta,
    events: &[Event],
) -> Result<Vec<i64>, StoreError> {
    append_expecting(tx, meta, events, None).await
}

/// Like [`append`], but fails with a conflict unless the first event's stream
/// is at `expected_version` (0: the stream is new).
pub(crate) async fn append_expecting(
    tx: &impl crate::client::GenericClient,
    meta: &EventMeta,
    events: &[Event],
    expected_version: Option<i64>,
) -> Result<Vec<i64>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(expected) = expected_version {
        let stream = events[0].stream();
        let current: i64 = tx
            .query_one("SELECT coalesce(max(version), 0) AS version FROM log_events WHERE stream = $1", &[&stream])
            .await?
            .get("version");
        if current != expected {
            return Err(Error::conflict(
                ErrorCode::StreamVersion,
                format!("stream {stream} is at version {current}, not {expected}"),
            )
            .into());
        }
    }
    let meta = serde_json::to_value(meta).expect("meta serializes");
    insert(tx, events.iter().map(|e| (e, meta.clone()))).await
}

/// Appends events of several requests at once, each with its own metadata
/// (a batch of claims decided together, see commands::claims).
pub(crate) async fn append_each(
    tx: &impl crate::client::GenericClient,
    events: &[(&EventMeta, Event)],
) -> Result<Vec<i64>, StoreError> {
    Append::each(events).run(tx).await
}

async fn insert<'a>(
    tx: &impl crate::client::GenericClient,
    events: impl Iterator<Item = (&'a Event, serde_json::Value)>,
) -> Result<Vec<i64>, StoreError> {
    Append::new(events).run(tx).await
}

/// Events to append, as the one statement that appends them: run here, or
/// sent by a caller with others ([`Append::statement`]).
pub(crate) struct Append {
    streams: Vec<String>,
    types: Vec<String>,
    datas: Vec<serde_json::Value>,
    metas: Vec<serde_json::Value>,
}

// One statement: number events per stream in input order, on top of each
// stream's current version.
const APPEND: &str = "WITH input AS (
         SELECT s, t, d, m, ord
         FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::jsonb[]) WITH ORDINALITY AS i(s, t, d, m, ord)
     ), numbered AS (
         SELECT s, t, d, m, ord,
                (SELECT coalesce(max(version), 0) FROM log_events l WHERE l.stream = input.s)
                  + row_number() OVER (PARTITION BY s ORDER BY ord) AS v
         FROM input
     )
     INSERT INTO log_events (stream, version, type, data, meta)
     SELECT s, v, t, d, m FROM numbered ORDER BY ord
     RETURNING position";

impl Append {
    fn new<'a>(events: impl Iterator<Item = (&'a Event, serde_json::Value)>) -> Append {
        let mut a = Append { streams: Vec::new(), types: Vec::new(), datas: Vec::new(), metas: Vec::new() };
        for (e, meta) in events {
            let (ty, data) = e.to_parts();
            a.streams.push(e.stream());
            a.types.push(ty);
            a.datas.push(data);
            a.metas.push(meta);
        }
        a
    }

    /// Events of one request.
    pub(crate) fn one(meta: &EventMeta, events: &[Event]) -> Append {
        let meta = serde_json::to_value(meta).expect("meta serializes");
        Append::new(events.iter().map(|e| (e, meta.clone())))
    }

    /// Events of several requests, each with its own metadata.
    pub(crate) fn each(events: &[(&EventMeta, Event)]) -> Append {
        Append::new(events.iter().map(|(m, e)| (e, serde_json::to_value(m).expect("meta serializes"))))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// The statement and its parameters; its rows give [`Append::positions`].
    pub(crate) fn statement(&self) -> (&'static str, [&(dyn tokio_postgres::types::ToSql + Sync); 4]) {
        (APPEND, [&self.streams, &self.types, &self.datas, &self.metas])
    }

    /// The events' positions, from the statement's rows.
    pub(crate) fn positions(rows: &[tokio_postgres::Row]) -> Vec<i64> {
        rows.iter().map(|r| r.get("position")).collect()
    }

    async fn run(&self, tx: &impl crate::client::GenericClient) -> Result<Vec<i64>, StoreError> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let (sql, params) = self.statement();
        Ok(Append::positions(&crate::sql::query(tx, sql, &params).await?))
    }
}

fn recorded(row: &tokio_postgres::Row) -> RecordedEvent {
    let txid: String = row.get("txid_text");
    RecordedEvent {
        position: row.get("position"),
        txid: txid.parse().unwrap_or(0),
        stream: row.get("stream"),
        version: row.get("version"),
        event_type: row.get("type"),
        data: row.get("data"),
        meta: row.get("meta"),
        recorded_at: row.get("recorded_at"),
    }
}

// The text form of txid gets its own name: a bare `txid` in ORDER BY would
// otherwise sort by the output column, as text.
const COLUMNS: &str = "position, txid::text AS txid_text, stream, version, type, data, meta, recorded_at";

/// Up to `limit` events after `after`, in reader order, only from
/// transactions that can no longer commit below the cursor.
pub async fn read_after(
    client: &impl GenericClient,
    after: Cursor,
    limit: i64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM log_events
                 WHERE (txid, position) > ($1::text::xid8, $2)
                   AND txid < pg_snapshot_xmin(pg_current_snapshot())
                 ORDER BY txid, position
                 LIMIT $3"
            ),
            &[&after.txid.to_string(), &after.position, &limit],
        )
        .await?;
    Ok(rows.iter().map(recorded).collect())
}

/// The last `limit` events that are final, in reader order: reading after
/// the last of them then skips nothing (every later event is at or above
/// the horizon).
pub async fn read_last(client: &impl GenericClient, limit: i64) -> Result<Vec<RecordedEvent>, StoreError> {
    let rows = client
        .query(
            &format!(
                "SELECT * FROM (SELECT {COLUMNS}, txid AS ord FROM log_events
                                 WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
                                 ORDER BY txid DESC, position DESC
                                 LIMIT $1) last
                 ORDER BY ord, position"
            ),
            &[&limit],
        )
        .await?;
    Ok(rows.iter().map(recorded).collect())
}

/// Every event in position order (the order replay applies them in), in pages.
pub async fn read_by_position(
    client: &impl GenericClient,
    after_position: i64,
    limit: i64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let rows = client
        .query(
            &format!("SELECT {COLUMNS} FROM log_events WHERE position > $1 ORDER BY position LIMIT $2"),
            &[&after_position, &limit],
        )
        .await?;
    Ok(rows.iter().map(recorded).collect())
}

impl Store {
    /// Reads the log after `after` (see [`read_after`]).
    pub async fn read_log(&self, after: Cursor, limit: i64) -> Result<Vec<RecordedEvent>, Error> {
        let client = self.client().await?;
        Ok(read_after(&**client, after, limit).await?)
    }

    /// The log's last `limit` final events (see [`read_last`]).
    pub async fn read_log_last(&self, limit: i64) -> Result<Vec<RecordedEvent>, Error> {
        let client = self.client().await?;
        Ok(read_last(&**client, limit).await?)
    }

    /// A cursor at the log's end as of now: reading after it gives every
    /// event not yet final now (every transaction at or above the horizon)
    /// and nothing older, so a live reader that starts here skips nothing.
    ///
    /// It names the last transaction below the horizon that wrote to the
    /// log, not the horizon itself: that transaction's commit reached every
    /// synchronous standby before it left the horizon, so a standby promoted
    /// later has counted transaction ids past it and gives none of its own
    /// new transactions an id at or below the cursor. An id between it and
    /// the horizon may have been spent by a transaction that aborted or
    /// wrote nothing, which a standby need not have seen, and reused there.
    pub async fn log_now(&self) -> Result<Cursor, Error> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT coalesce((SELECT txid FROM log_events
                                  WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
                                  ORDER BY txid DESC LIMIT 1)::text, '0') AS last",
                &[],
            )
            .await
            .map_err(StoreError::from)?;
        let last: u64 =
            row.get::<_, String>("last").parse().map_err(|_| Error::internal("the transaction id is not a number"))?;
        Ok(Cursor { txid: last, position: i64::MAX })
    }

    /// Appends events as one transaction, applying them to the projections
    /// as a command does (runs of like events set-wise,
    /// `projection::apply_all`). For events whose commands need no reads
    /// (and for tests of the log, and benches booking a cloud in bulk).
    pub async fn append(
        &self,
        meta: &EventMeta,
        events: &[Event],
        expected_version: Option<i64>,
    ) -> Result<Vec<i64>, Error> {
        let refs: Vec<&Event> = events.iter().collect();
        crate::tx::command!(self, |tx| {
            let positions = append_expecting(tx, meta, events, expected_version).await?;
            crate::projection::apply_all(tx, &refs).await?;
            Ok(positions)
        })
    }
}

impl Store {
    /// Refuses a server whose transaction ids are behind the log's. The
    /// log orders events by the ids that wrote them (see above); a dump
    /// restored onto another cluster brings ids that cluster has not handed
    /// out yet, so what it writes next would sort before them and a reader
    /// holding a cursor would never see it. The way out is to raise the
    /// cluster's id epoch past the log's (`pg_resetwal -e`), which this
    /// names.
    pub async fn check_log_order(&self) -> anyhow::Result<()> {
        let c = self.client().await?;
        let row = c
            .query_one(
                "SELECT coalesce(max(txid) >= pg_snapshot_xmax(pg_current_snapshot()), false) AS ahead,
                        max(txid)::text AS logged, pg_snapshot_xmax(pg_current_snapshot())::text AS next,
                        (div(max(txid)::text::numeric, 4294967296) + 1)::int8 AS epoch
                 FROM log_events",
                &[],
            )
            .await
            .map_err(StoreError::from)?;
        if !row.get::<_, bool>("ahead") {
            return Ok(());
        }
        let (logged, next, epoch): (String, String, i64) = (row.get("logged"), row.get("next"), row.get("epoch"));
        anyhow::bail!(
            "the log holds transaction id {logged}, ahead of this server's next ({next}): the database was \
             restored onto another PostgreSQL cluster. Events written now would sort before the restored ones. \
             Stop the server and raise its transaction id epoch first: pg_resetwal -e {epoch} -D <its data \
             directory> (docs/backups.md)"
        )
    }
}
