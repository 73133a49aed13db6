//! `berth events list|tail` (lease events) and `berth log tail` (the event
//! log, live over Server-Sent Events).

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use crate::client::Client;
use crate::Format;

#[derive(Args, Clone, Default)]
pub struct EventFilter {
    /// Only this lease's events (its id or name).
    #[arg(long)]
    lease: Option<String>,
    /// UNDONE, IN_PROGRESS, DONE, ERROR or CANCELLED.
    #[arg(long)]
    status: Option<String>,
    /// start_lease, before_end_lease or end_lease.
    #[arg(long = "type")]
    event_type: Option<String>,
}

impl EventFilter {
    /// With a lease given by name, its id.
    fn resolved(mut self, client: &Client) -> Result<Self> {
        if let Some(l) = &self.lease {
            self.lease = Some(crate::leases::lease_id(client, l)?);
        }
        Ok(self)
    }

    fn query(&self) -> Vec<(String, String)> {
        let mut q = Vec::new();
        if let Some(l) = &self.lease {
            q.push(("lease_id".into(), l.clone()));
        }
        if let Some(s) = &self.status {
            q.push(("status".into(), s.to_ascii_uppercase()));
        }
        if let Some(t) = &self.event_type {
            q.push(("event_type".into(), t.clone()));
        }
        q
    }
}

#[derive(Subcommand)]
pub enum EventsCommand {
    /// Lease events in due-time order: status, attempts, last error, claimer.
    List {
        #[command(flatten)]
        filter: EventFilter,
        /// At most this many events.
        #[arg(long)]
        limit: Option<u32>,
        /// Events after this one.
        #[arg(long)]
        marker: Option<String>,
    },
    /// Lease events as they stand, one line each; with --follow, then each
    /// change as it happens (a live stream, reconnecting after a drop),
    /// until interrupted.
    Tail {
        #[command(flatten)]
        filter: EventFilter,
        /// Keep watching until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// Run a lease event in ERROR again: attempts reset, due now (admin).
    Retry {
        /// The lease event's id.
        id: String,
    },
    /// Cancel a waiting lease event: it never fires; the lease goes on (admin).
    Cancel {
        /// The lease event's id.
        id: String,
    },
    /// Make a waiting lease event due now (admin).
    Fire {
        /// The lease event's id.
        id: String,
    },
}

#[derive(Subcommand)]
pub enum ManagerCommand {
    /// Whether the managers are paused, who said so, replicas, and how many
    /// lease events are due, running and failed (admin).
    Status,
    /// Pause every manager: none claims another lease event until resumed
    /// (admin).
    Pause,
    /// Resume the managers: what fell due meanwhile fires (admin).
    Resume,
}

#[derive(Subcommand)]
pub enum LogCommand {
    /// The last log entries, one line each, or those after a cursor; with
    /// --follow, then live.
    Tail {
        /// Start with this many of the last entries (those passing the filters).
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: usize,
        /// Instead of the last entries: every one after this cursor
        /// (TXID-POSITION, as entries carry; `0-0` is the beginning).
        #[arg(long, conflicts_with = "lines")]
        after: Option<String>,
        /// Keep following live until interrupted, reconnecting after a drop.
        #[arg(long)]
        follow: bool,
        /// Only this stream (e.g. `lease:<id>`).
        #[arg(long)]
        stream: Option<String>,
        /// Only this event type (e.g. `LeaseEventFinished`).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// Only this lease's stream (its id or name).
        #[arg(long)]
        lease: Option<String>,
    },
}

const COLUMNS: &[&str] =
    &["id", "lease_id", "event_type", "time", "status", "attempts", "last_error", "claimed_by", "updated_at"];

fn path(base: &str, q: &[(String, String)]) -> String {
    if q.is_empty() {
        return base.to_string();
    }
    let pairs: Vec<String> = q.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    format!("{base}?{}", pairs.join("&"))
}

/// Query values are ids, names and cursors; escape what would break a URL.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every event the filter selects, following markers.
fn all_events(client: &Client, filter: &EventFilter) -> Result<Vec<Value>> {
    let mut out: Vec<Value> = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let mut q = filter.query();
        q.push(("limit".into(), "1000".into()));
        if let Some(m) = &marker {
            q.push(("marker".into(), m.clone()));
        }
        let body = client.get(&path("/v1/events", &q))?;
        let page = body["events"].as_array().cloned().unwrap_or_default();
        let full = page.len() == 1000;
        marker = page.last().and_then(|e| e["id"].as_str()).map(str::to_string);
        out.extend(page);
        if !full {
            return Ok(out);
        }
    }
}

fn event_line(client: &Client, e: &Value) -> String {
    if client.format == Format::Json {
        return e.to_string();
    }
    let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
    let mut line = format!(
        "{}  {:<16} {:<11} lease={} attempts={} due={}",
        s("updated_at"),
        s("event_type"),
        s("status"),
        s("lease_id"),
        e["attempts"],
        s("time")
    );
    if let Some(by) = e["claimed_by"].as_str() {
        line.push_str(&format!(" by={by}"));
    }
    if let Some(err) = e["last_error"].as_str() {
        line.push_str(&format!(" error={err:?}"));
    }
    line
}

/// `berth events retry|cancel|fire ID`: the control, then the event.
fn control(client: &Client, id: &str, action: &str) -> Result<()> {
    let out =
        client.call(Method::POST, &format!("/v1/events/{}/{action}", encode(id)), Some(&serde_json::json!({})))?;
    client.print_object(&out["event"])
}

/// `berth manager status|pause|resume`: the manager, its nested fields
/// flattened so that `-c` can pick them.
pub fn run_manager(client: &Client, c: ManagerCommand) -> Result<()> {
    let doc = match c {
        ManagerCommand::Status => client.get("/v1/manager")?,
        ManagerCommand::Pause | ManagerCommand::Resume => {
            let body = serde_json::json!({"paused": matches!(c, ManagerCommand::Pause)});
            client.call(Method::PUT, "/v1/manager", Some(&body))?
        }
    };
    let m = &doc["manager"];
    let by = &m["changed_by"];
    let replicas: Vec<String> = m["replicas"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| format!("{} ({} in progress)", r["id"].as_str().unwrap_or(""), r["in_progress"]))
        .collect();
    let flat = serde_json::json!({
        "paused": m["paused"],
        "changed_at": m["changed_at"],
        "changed_by": by["user_id"].as_str().map(|u| format!("{u} ({})", by["project_id"].as_str().unwrap_or(""))),
        "replicas": replicas.join(", "),
        "due": m["counts"]["due"],
        "in_progress": m["counts"]["in_progress"],
        "error": m["counts"]["error"],
    });
    client.print_object(&flat)
}

pub fn run_events(client: &Client, c: EventsCommand) -> Result<()> {
    match c {
        EventsCommand::Retry { id } => control(client, &id, "retry"),
        EventsCommand::Cancel { id } => control(client, &id, "cancel"),
        EventsCommand::Fire { id } => control(client, &id, "fire"),
        EventsCommand::List { filter, limit, marker } => {
            let mut q = filter.resolved(client)?.query();
            if let Some(l) = limit {
                q.push(("limit".into(), l.to_string()));
            }
            if let Some(m) = marker {
                q.push(("marker".into(), m));
            }
            let body = client.get(&path("/v1/events", &q))?;
            client.print_list(body["events"].as_array().map(Vec::as_slice).unwrap_or(&[]), COLUMNS)?;
            Ok(())
        }
        EventsCommand::Tail { filter, follow } => tail_events(client, filter.resolved(client)?, follow),
    }
}

/// Prints the events the filter selects, oldest change first.
fn print_snapshot(client: &Client, filter: &EventFilter) -> Result<()> {
    let mut events = all_events(client, filter)?;
    events.sort_by(|a, b| a["updated_at"].as_str().cmp(&b["updated_at"].as_str()));
    let mut out = std::io::stdout().lock();
    for e in &events {
        writeln!(out, "{}", event_line(client, e))?;
    }
    out.flush()?;
    Ok(())
}

/// `berth events tail`: the events as they stand; with `follow`, then each
/// change from the live stream. The stream is opened before the snapshot
/// is read, so no change falls between them.
fn tail_events(client: &Client, filter: EventFilter, follow: bool) -> Result<()> {
    if !follow {
        return print_snapshot(client, &filter);
    }
    let mut snapshot_taken = false;
    let stream = path("/v1/events/stream", &filter.query());
    follow_stream(
        client,
        &stream,
        None,
        &mut || {
            if !snapshot_taken {
                snapshot_taken = true;
                print_snapshot(client, &filter)?;
            }
            Ok(())
        },
        &mut |kind, e| {
            if kind != "start" {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", event_line(client, &e))?;
                out.flush()?;
            }
            Ok(())
        },
    )
}

/// Follows the Server-Sent Events stream at `path` until interrupted:
/// `connected` after each connection, `each` with every message's event
/// name and data. After a drop (a server restarting, say) it reconnects,
/// backing off while the server cannot be reached, and resumes after the
/// last id seen (`Last-Event-ID`), so it skips nothing.
fn follow_stream(
    client: &Client,
    path: &str,
    mut last: Option<String>,
    connected: &mut dyn FnMut() -> Result<()>,
    each: &mut dyn FnMut(&str, Value) -> Result<()>,
) -> Result<()> {
    let mut backoff = RECONNECT_FIRST;
    loop {
        let resp = match client.stream(path, last.as_deref()) {
            Ok(r) => r,
            Err(e) if e.downcast_ref::<crate::client::Unavailable>().is_some() => {
                eprintln!("berth: {e:#}; reconnecting in {} ms", backoff.as_millis());
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(RECONNECT_MAX);
                continue;
            }
            Err(e) => return Err(e),
        };
        backoff = RECONNECT_FIRST;
        connected()?;
        let (mut data, mut kind, mut id) = (String::new(), String::new(), None::<String>);
        for line in BufReader::new(resp).lines() {
            let Ok(line) = line else { break };
            if line.is_empty() {
                if !data.is_empty() {
                    let v: Value = serde_json::from_str(&data).map_err(|e| anyhow!("bad message {data:?}: {e}"))?;
                    each(if kind.is_empty() { "message" } else { &kind }, v)?;
                }
                if id.is_some() {
                    last = id.take();
                }
                data.clear();
                kind.clear();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            } else if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_string();
            }
        }
        std::thread::sleep(RECONNECT_FIRST);
    }
}

fn entry_line(client: &Client, e: &Value) -> String {
    if client.format == Format::Json {
        return e.to_string();
    }
    format!(
        "{} {} {} {} {}",
        e["position"],
        e["recorded_at"].as_str().unwrap_or(""),
        e["stream"].as_str().unwrap_or(""),
        e["type"].as_str().unwrap_or(""),
        e["data"]
    )
}

pub fn run_log(client: &Client, c: LogCommand) -> Result<()> {
    let LogCommand::Tail { lines, after, follow, stream, event_type, lease } = c;
    let mut q: Vec<(String, String)> = Vec::new();
    if let Some(s) = stream {
        q.push(("stream".into(), s));
    }
    if let Some(t) = event_type {
        q.push(("type".into(), t));
    }
    if let Some(l) = lease {
        q.push(("lease".into(), crate::leases::lease_id(client, &l)?));
    }
    let wanted = |e: &Value| {
        q.iter().all(|(k, v)| match k.as_str() {
            "stream" => e["stream"] == *v.as_str(),
            "type" => e["type"] == *v.as_str(),
            _ => e["stream"] == *format!("lease:{v}").as_str(),
        })
    };
    // What to show before following, and the cursor after it.
    let (shown, cursor) = match after {
        // The server knows the last entries; filtered, they are found by
        // reading the log through (the filters are applied here).
        None if q.is_empty() => {
            let body = client.get(&format!("/v1/log?last={}", lines.clamp(1, 10_000)))?;
            let entries = body["entries"].as_array().cloned().unwrap_or_default();
            let skip = entries.len().saturating_sub(lines);
            (entries[skip..].to_vec(), body["next"].as_str().unwrap_or_default().to_string())
        }
        None => {
            let mut kept = std::collections::VecDeque::new();
            let cursor = read_after(client, String::new(), &mut |e| {
                if lines > 0 && wanted(&e) {
                    if kept.len() == lines {
                        kept.pop_front();
                    }
                    kept.push_back(e);
                }
            })?;
            (kept.into(), cursor)
        }
        Some(after) => {
            let mut out = std::io::stdout().lock();
            let mut failed = Ok(());
            let cursor = read_after(client, after, &mut |e| {
                if failed.is_ok() && wanted(&e) {
                    failed = writeln!(out, "{}", entry_line(client, &e));
                }
            })?;
            failed?;
            (Vec::new(), cursor)
        }
    };
    let mut out = std::io::stdout().lock();
    for e in &shown {
        writeln!(out, "{}", entry_line(client, e))?;
    }
    out.flush()?;
    drop(out);
    if !follow {
        return Ok(());
    }
    // Live from there, resuming where it stopped after a drop.
    let last: Option<String> = if cursor.is_empty() { None } else { Some(cursor) };
    follow_stream(client, &path("/v1/log/stream", &q), last, &mut || Ok(()), &mut |_, entry| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", entry_line(client, &entry))?;
        out.flush()?;
        Ok(())
    })
}

/// Pages through the log after `cursor` up to now, each entry to `each`;
/// answers the cursor after the last.
fn read_after(client: &Client, mut cursor: String, each: &mut dyn FnMut(Value)) -> Result<String> {
    loop {
        let body =
            client.get(&path("/v1/log", &[("after".into(), cursor.clone()), ("limit".into(), "1000".into())]))?;
        let entries = body["entries"].as_array().cloned().unwrap_or_default();
        cursor = body["next"].as_str().unwrap_or_default().to_string();
        if entries.is_empty() {
            return Ok(cursor);
        }
        entries.into_iter().for_each(&mut *each);
    }
}

/// The first wait before reconnecting a live tail, doubled up to [`RECONNECT_MAX`].
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
const RECONNECT_MAX: Duration = Duration::from_secs(8);
