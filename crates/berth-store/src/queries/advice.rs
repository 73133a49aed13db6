//! Advice on leases: when a set of reservations would fit, and how far a
//! lease could be extended on what it holds. Reads only; locks nothing.

use berth_core::error::ErrorCode;
use berth_core::lease::Demand;
use berth_core::schedule;
use berth_core::time::DateMath;
use berth_core::{Error, Window};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use std::collections::BTreeSet;

use super::fit::{candidate_ids, decide, gather, Gathered, Item};
use super::leases::{load_leases, visible};
use super::{ends, free};
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
    /// The earliest of its reservations' (they move together).
    pub latest_end: Option<DateTime<Utc>>,
    pub horizon: DateTime<Utc>,
    /// Each reservation's own, in the lease's order.
    pub reservations: Vec<ReservationExtension>,
}

/// How far one reservation could be prolonged on what it holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReservationExtension {
    pub id: Uuid,
    pub resource_type: String,
    /// `None`: free until the horizon.
    pub latest_end: Option<DateTime<Utc>>,
}

/// Most start times advice tries.
const MAX_TRIES: usize = 5_000;

/// Start times tried on the few hosts free then, before the rest are
/// decided on every candidate: past this many, the calendar is so full
/// that reading it once costs less than reading it per start time.
const BOUNDED: usize = 64;

/// Hosts read free per start time beyond those a demand takes: spares for
/// those its own rules refuse (a property SQL does not check).
const FREE_MORE: i64 = 16;

impl Store {
    /// The earliest windows of `duration` within `[from, until)` (each
    /// starting no later than `until - duration`) in which every reservation
    /// of a lease of `project` would fit together, at most `limit` of them:
    /// tried at `from` and at each instant a hold on a host they may use
    /// ends (`ends::Ends`). Reads only; locks nothing.
    ///
    /// Each start time is tried on the few hosts free over its window
    /// (`free::free_hosts`), a batch of start times at once: a fit there is
    /// a fit. A whole-host lease that fits on none of them, when they were
    /// every usable host free then, fits nowhere. Otherwise, and once
    /// [`BOUNDED`] start times have been tried so, the rest are decided on
    /// every candidate over the whole range, read once.
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
        let cleaning = self.cleaning_time();
        crate::tx::command!(self, |tx| {
            let items: Vec<Item> = reservations.iter().map(|r| Item::Place(r.as_ref(), Vec::new())).collect();
            let demands: Vec<(&Demand, i64)> = items
                .iter()
                .filter_map(|i| match i {
                    Item::Place(d @ Demand::Hosts { max: n, .. }, _)
                    | Item::Place(d @ Demand::Slots { amount: n, .. }, _) => Some((*d, i64::from(*n) + FREE_MORE)),
                    _ => None,
                })
                .collect();
            let exact = demands.iter().all(|(d, _)| matches!(d, Demand::Hosts { .. }));
            let mut ends = ends::Ends::new(project, demands.iter().map(|d| d.0).collect(), cleaning, from, last_start);
            let mut first = Some(from);
            let (mut out, mut tried) = (Vec::new(), 0);
            // Every candidate over the whole range, once the few hosts free
            // at a start time could not decide it.
            let mut full: Option<Gathered> = None;
            while out.len() < limit && tried < MAX_TRIES {
                let want = (limit - out.len()).min(MAX_TRIES - tried);
                let mut starts: Vec<DateTime<Utc>> = first.take().into_iter().collect();
                if starts.len() < want {
                    starts.extend(ends.next(tx, want - starts.len()).await?);
                }
                if starts.is_empty() {
                    break;
                }
                tried += starts.len();
                let windows = starts
                    .iter()
                    .map(|&start| Ok(Window { start, end: Some(start.plus("end_date", duration)?) }))
                    .collect::<Result<Vec<Window>, Error>>()?;
                let mut undecided = windows.clone();
                if full.is_none() && tried <= BOUNDED && !demands.is_empty() {
                    undecided.clear();
                    let lists = free::free_hosts(tx, project, &demands, &windows, cleaning).await?;
                    let ids: BTreeSet<Uuid> = lists.iter().flat_map(|l| l.ids.iter().copied()).collect();
                    let ids: Vec<Uuid> = ids.into_iter().collect();
                    let span = Window { start: windows[0].start, end: windows[windows.len() - 1].end };
                    let g = gather(tx, &ids, span, windows[0], &[], cleaning).await?;
                    for (window, list) in windows.iter().zip(&lists) {
                        if decide(&mut g.clone(), project, &items, &[*window]).is_ok() {
                            out.push(Availability { start: window.start, end: window.end.unwrap_or(window.start) });
                        } else if !(exact && list.complete) {
                            undecided.push(*window);
                        }
                    }
                }
                for window in undecided {
                    let g = match &full {
                        Some(g) => g,
                        None => {
                            let span = Window { start: from, end: Some(until) };
                            let ids = candidate_ids(tx, project, &items).await?;
                            full.insert(gather(tx, &ids, span, span, &[], cleaning).await?)
                        }
                    };
                    if decide(&mut g.clone(), project, &items, &[window]).is_ok() {
                        out.push(Availability { start: window.start, end: window.end.unwrap_or(window.start) });
                    }
                }
                out.sort_by_key(|a| a.start);
            }
            out.truncate(limit);
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
            let earliest = |a: Option<DateTime<Utc>>, b: DateTime<Utc>| Some(a.map_or(b, |a| a.min(b)));
            let mut reservations = Vec::with_capacity(lease.reservations.len());
            for r in &lease.reservations {
                let mut latest: Option<DateTime<Utc>> = None;
                for s in &r.slots {
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
                            latest = earliest(latest, t);
                        }
                    }
                }
                reservations.push(ReservationExtension {
                    id: r.id,
                    resource_type: r.resource_type.clone(),
                    latest_end: latest,
                });
            }
            let latest_end = reservations.iter().filter_map(|r| r.latest_end).min();
            Ok(Extension { end: lease.end, latest_end, horizon, reservations })
        })
    }
}
