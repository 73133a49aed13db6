//! Advice on leases: when a set of reservations would fit, and how far a
//! lease could be extended on what it holds. Reads only; locks nothing.

use berth_core::error::ErrorCode;
use berth_core::lease::Demand;
use berth_core::schedule;
use berth_core::time::DateMath;
use berth_core::{Error, Window};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::fit::{candidate_ids, decide, gather, Item};
use super::leases::{load_leases, visible};
use crate::Store;

/// A window in which a whole lease would fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Availability {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// How far a lease could be extended on what it holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Extension {
    pub end: DateTime<Utc>,
    /// The latest end within the horizon; `None`: the horizon itself is free.
    pub latest_end: Option<DateTime<Utc>>,
    pub horizon: DateTime<Utc>,
}

/// Most start times advice tries.
const MAX_TRIES: usize = 5_000;

impl Store {
    /// The earliest windows of `duration` within `[from, until)` (each
    /// starting no later than `until - duration`) in which every reservation
    /// of a lease of `project` would fit together, at most `limit` of them.
    /// Reads only; locks nothing.
    pub async fn availability(
        &self,
        project: &str,
        reservations: &[impl AsRef<Demand>],
        duration: chrono::Duration,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<Availability>, Error> {
        let last_start = until.minus("until", duration)?;
        if last_start < from {
            return Err(Error::invalid(ErrorCode::InvalidDate, "the search range is shorter than the duration"));
        }
        crate::tx::command!(self, |tx| {
            let items: Vec<Item> = reservations.iter().map(|r| Item::Place(r.as_ref(), Vec::new())).collect();
            let span = Window { start: from, end: Some(until) };
            let ids = candidate_ids(tx, project, &items).await?;
            let g = gather(tx, &ids, span, span, &[], self.cleaning_time()).await?;
            let ends = g.candidates.iter().flat_map(|c| c.holds.values().flatten().map(|h| h.0));
            let mut out = Vec::new();
            for start in schedule::start_times(ends, from, last_start).into_iter().take(MAX_TRIES) {
                let end = start.plus("end_date", duration)?;
                let window = Window { start, end: Some(end) };
                if decide(&mut g.clone(), project, &items, &[window]).is_ok() {
                    out.push(Availability { start, end });
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
    }

    /// The latest end the lease could be moved to, keeping every slot where
    /// it is, looking as far as `horizon`.
    pub async fn extension(&self, id: Uuid, project: Option<&str>, horizon: DateTime<Utc>) -> Result<Extension, Error> {
        crate::tx::command!(self, |tx| {
            let lease = visible(load_leases(tx, &[id]).await?.pop(), id, project)?.record;
            let own: Vec<Uuid> = lease.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.consumer)).collect();
            let items: Vec<Item> = lease.reservations.iter().map(|r| Item::Fixed(&r.slots)).collect();
            let span = Window { start: lease.end, end: Some(horizon.max(lease.end)) };
            let ids = candidate_ids(tx, &lease.project_id, &items).await?;
            let g = gather(tx, &ids, span, span, &own, self.cleaning_time()).await?;
            let mut latest: Option<DateTime<Utc>> = None;
            for s in lease.reservations.iter().flat_map(|r| r.slots.iter()) {
                let Some(c) = g.index.get(&s.provider).map(|&i| &g.candidates[i]) else {
                    continue;
                };
                for (class, used) in &s.resources {
                    let capacity = c.inventories.get(class).map(|i| i.capacity()).unwrap_or(0);
                    let holds = c.holds.get(class).map(Vec::as_slice).unwrap_or(&[]);
                    // The lease's own end needs its cleaning before the next one.
                    let first = schedule::first_conflict(holds, *used, capacity, lease.end, horizon)
                        .map(|t| t.checked_sub_signed(c.cleaning).unwrap_or(t).max(lease.end))
                        .or((*used > capacity).then_some(lease.end));
                    if let Some(t) = first {
                        latest = Some(latest.map_or(t, |l| l.min(t)));
                    }
                }
            }
            Ok(Extension { end: lease.end, latest_end: latest, horizon })
        })
    }
}
