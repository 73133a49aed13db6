//! Live streams open at once, bounded per caller and in all: a stream holds
//! a [`Slot`] for as long as it lives, and a caller over either bound gets
//! 429.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::sse::Event as SseEvent;
use berth_core::error::ErrorCode;

use crate::error::ApiError;

/// One Server-Sent Event as a live stream sends it: the schema of a
/// stream's answer, event by event (`data` is JSON text, or empty for a
/// keep-alive).
// A stream makes each of its events as one, and axum's `Sse` writes it
// ([`StreamEvent::sse`]).
#[derive(utoipa::ToSchema)]
pub(crate) struct StreamEvent {
    /// The kind: `start`, or the entry's or lease event's kind.
    pub event: Option<String>,
    /// The cursor to resume after (`Last-Event-ID`).
    pub id: Option<String>,
    pub data: String,
}

impl StreamEvent {
    /// The event as axum's `Sse` writes it: its kind, its cursor and its data.
    pub fn sse(self) -> SseEvent {
        let mut ev = SseEvent::default();
        if let Some(kind) = self.event {
            ev = ev.event(kind);
        }
        if let Some(id) = self.id {
            ev = ev.id(id);
        }
        ev.data(self.data)
    }
}

#[derive(Debug, Default)]
pub struct Streams {
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_caller: HashMap<String, usize>,
}

/// One open stream, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    streams: Arc<Streams>,
    caller: String,
}

impl Streams {
    /// A slot for `caller`, or 429 if it or the server has `max_per_caller`
    /// or `max_total` open.
    pub fn open(self: &Arc<Self>, caller: &str, max_per_caller: usize, max_total: usize) -> Result<Slot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mine = open.per_caller.get(caller).copied().unwrap_or(0);
        if mine >= max_per_caller || open.total >= max_total {
            let detail = if mine >= max_per_caller {
                format!("{caller} has {mine} live streams open, the most one caller may; close one first")
            } else {
                format!("the server has {} live streams open, the most it serves; try again later", open.total)
            };
            return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, ErrorCode::TooManyStreams, detail));
        }
        open.total += 1;
        *open.per_caller.entry(caller.to_string()).or_insert(0) += 1;
        Ok(Slot { streams: self.clone(), caller: caller.to_string() })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_caller.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.per_caller.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_and_given_back() {
        let s = Arc::new(Streams::default());
        let a1 = s.open("a", 2, 3).unwrap();
        let _a2 = s.open("a", 2, 3).unwrap();
        assert_eq!(s.open("a", 2, 3).unwrap_err().status, StatusCode::TOO_MANY_REQUESTS);
        let _b1 = s.open("b", 2, 3).unwrap();
        assert_eq!(s.open("c", 2, 3).unwrap_err().code, ErrorCode::TooManyStreams);
        drop(a1);
        assert!(s.open("c", 2, 3).is_ok());
    }
}
