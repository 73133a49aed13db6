//! `berth events list|tail` (lease events) and `berth log tail` (the event
//! log, live over Server-Sent Events).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::client::Client;
use crate::Format;

#[derive(Args, Clone, Default)]
pub struct EventFilter {
    /// Only this lease's events (its id or name).
    #[arg(long)]
    lease: Option<String>,
    /// UNDONE, IN_PROGRESS, DONE or ERROR.
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
    /// Lease events as they change, one line each; with --follow, until
    /// interrupted.
    Tail {
        #[command(flatten)]
        filter: EventFilter,
        /// Keep watching until interrupted.
        #[arg(long)]
        follow: bool,
        /// How often to look, with --follow.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
    },
}

#[derive(Subcommand)]
pub enum LogCommand {
    /// Log entries after a cursor, one line each; with --follow, live.
    Tail {
        /// Start after this cursor (TXID-POSITION, as entries carry); the
        /// beginning when absent.
        #[arg(long)]
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

pub fn run_events(client: &Client, c: EventsCommand) -> Result<()> {
    match c {
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
        EventsCommand::Tail { filter, follow, interval_ms } => {
            let filter = filter.resolved(client)?;
            let mut seen: HashMap<String, String> = HashMap::new();
            loop {
                let mut changed: Vec<Value> = all_events(client, &filter)?
                    .into_iter()
                    .filter(|e| {
                        let id = e["id"].as_str().unwrap_or_default().to_string();
                        let updated = e["updated_at"].as_str().unwrap_or_default().to_string();
                        seen.insert(id, updated.clone()).as_deref() != Some(updated.as_str())
                    })
                    .collect();
                changed.sort_by(|a, b| a["updated_at"].as_str().cmp(&b["updated_at"].as_str()));
                let mut out = std::io::stdout().lock();
                for e in &changed {
                    writeln!(out, "{}", event_line(client, e))?;
                }
                out.flush()?;
                if !follow {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(interval_ms.max(100)));
            }
        }
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
    let LogCommand::Tail { after, follow, stream, event_type, lease } = c;
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
    let mut cursor = after.unwrap_or_default();
    if !follow {
        // Pages up to now; filters applied here as the live tail applies them.
        loop {
            let body =
                client.get(&path("/v1/log", &[("after".into(), cursor.clone()), ("limit".into(), "1000".into())]))?;
            let entries = body["entries"].as_array().cloned().unwrap_or_default();
            let mut out = std::io::stdout().lock();
            for e in &entries {
                let wanted = q.iter().all(|(k, v)| match k.as_str() {
                    "stream" => e["stream"] == *v.as_str(),
                    "type" => e["type"] == *v.as_str(),
                    _ => e["stream"] == *format!("lease:{v}").as_str(),
                });
                if wanted {
                    writeln!(out, "{}", entry_line(client, e))?;
                }
            }
            cursor = body["next"].as_str().unwrap_or_default().to_string();
            if entries.is_empty() {
                return Ok(());
            }
        }
    }
    // Live: reconnect after a dropped connection (a server restarting, say),
    // backing off while it cannot be reached, resuming where it stopped.
    let mut last: Option<String> = if cursor.is_empty() { None } else { Some(cursor) };
    let mut backoff = RECONNECT_FIRST;
    loop {
        let resp = match client.stream(&path("/v1/log/stream", &q), last.as_deref()) {
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
        let mut data = String::new();
        let mut id: Option<String> = None;
        for line in BufReader::new(resp).lines() {
            let Ok(line) = line else { break };
            if line.is_empty() {
                if !data.is_empty() {
                    let entry: Value = serde_json::from_str(&data).map_err(|e| anyhow!("bad entry {data:?}: {e}"))?;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{}", entry_line(client, &entry))?;
                    out.flush()?;
                    if id.is_some() {
                        last = id.take();
                    }
                }
                data.clear();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            } else if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_string());
            }
        }
        std::thread::sleep(RECONNECT_FIRST);
    }
}

/// The first wait before reconnecting a live tail, doubled up to [`RECONNECT_MAX`].
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
const RECONNECT_MAX: Duration = Duration::from_secs(8);
