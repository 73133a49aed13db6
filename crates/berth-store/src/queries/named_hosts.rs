//! The hosts near a window when the lease's properties name few hosts (a
//! rack, a kind of machine): those holding the texts the properties
//! require are found through an index on capabilities, and each is ranked
//! by its free time around the window in SQL, a probe of its own holds
//! each way (`allocations_provider_upper` / `_lower`), rather than by
//! walking every hold near the window until enough of theirs turn up
//! (`queries::near`), which reads twenty holds for each one kept when the
//! properties keep one host in twenty, and the whole year around the
//! window when they name fewer hosts than the lists want.
//!
//! Up to [`FEW`] hosts are ranked so; more than that, and the caller walks
//! the lists. As there, SQL only narrows: berth-core decides on the hosts
//! read, and [`Near::bound`] vouches for its choice.

use std::collections::BTreeSet;

use berth_core::lease::Demand;
use berth_core::schedule::GAP_HORIZON;
use berth_core::Window;
use chrono::Duration;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::near::{around, free, others, required, seconds, usable, Near, AS_BEFORE, CUSTOM};
use crate::client::GenericClient;
use crate::sql;
use crate::StoreError;

/// Hosts at most ranked one by one. The store's own tests rank fewer, so
/// that their clouds of some forty hosts take both ways (a zone of 32
/// hosts walks the lists, a rack of ten is ranked).
#[cfg(not(test))]
pub(crate) const FEW: i64 = 1_000;
#[cfg(test)]
pub(crate) const FEW: i64 = 24;

/// The gap around `[$1, $2)` of host `h` as `Candidate::gap` counts it:
/// from the latest end of a hold at or before the window's start, to the
/// earliest start of one at or after its end, each side at most a year.
macro_rules! gap {
    () => {
        " least(coalesce($1::timestamptz - (SELECT max(upper(a.during)) FROM allocations a
                                           WHERE a.provider_uuid = h.provider_uuid AND upper(a.during) <= $1),
                          interval '8760 hours'), interval '8760 hours')
          + least(coalesce((SELECT min(lower(a.during)) FROM allocations a
                            WHERE a.provider_uuid = h.provider_uuid AND lower(a.during) >= $2) - $2::timestamptz,
                           interval '8760 hours'), interval '8760 hours') "
    };
}

/// Rows: 0, the hosts holding the texts `$5` counted up to `$7` (one more
/// than [`FEW`]); then, unless more than [`FEW`], 1, the usable ones
/// passing `$listed`, the `$6` tightest around the window and every host
/// tied with the last, each with its gap in seconds. Every host is ranked
/// first (two probes) and checked usable and free in that order, so those
/// checks probe only as far down the ranking as the answer reaches.
macro_rules! ranked {
    ($listed:expr) => {
        concat!(
            "WITH m AS MATERIALIZED (SELECT provider_uuid FROM hosts WHERE capabilities @> $5 LIMIT $7)
             SELECT 0 AS kind, NULL::uuid AS host, count(*)::float8 AS value FROM m
             UNION ALL
             (SELECT 1, h.provider_uuid, h.gap
              FROM (SELECT h.*, extract(epoch FROM",
            gap!(),
            ")::float8 AS gap
                    FROM m CROSS JOIN LATERAL (SELECT * FROM hosts WHERE provider_uuid = m.provider_uuid OFFSET 0) h
                    WHERE (SELECT count(*) FROM m) < $7
                    ORDER BY gap OFFSET 0) h",
            around!(),
            " WHERE",
            usable!(),
            $listed,
            " ORDER BY h.gap FETCH FIRST $6 ROWS WITH TIES)"
        )
    };
}

/// For a lease of one window: the hosts free over it.
const RANKED_FREE: &str = ranked!(concat!(" AND", free!()));
/// For a series, ranked around its first window: free over it or not.
const RANKED_ANY: &str = ranked!("");

/// As `near::read` (the same arguments), for a whole-host demand whose
/// properties require texts held by at most [`FEW`] hosts: those hosts,
/// ranked around the first window, the usual few of them at `depth` 1 and
/// their ties. `None`: another demand, no text required, or more hosts
/// hold the texts (walk the lists instead).
pub(crate) async fn read(
    c: &impl GenericClient,
    project: &str,
    demand: &Demand,
    windows: &[Window],
    cleaning: Duration,
    depth: i64,
) -> Result<Option<Near>, StoreError> {
    let (Demand::Hosts { max, .. }, Some(window)) = (demand, windows.first()) else {
        return Ok(None);
    };
    let required = required(demand);
    if required.as_object().is_none_or(|m| m.is_empty()) {
        return Ok(None);
    }
    let rows = others(*max).saturating_mul(depth);
    let series = windows.len() > 1;
    let required = &required;
    let end = window.end.unwrap_or(window.start);
    let secs = cleaning.num_milliseconds().max(0) as f64 / 1000.0;
    let up_to = FEW.saturating_add(1);
    let params: [&(dyn ToSql + Sync); 7] = [&window.start, &end, &secs, &project, required, &rows, &up_to];
    let statement = if series { RANKED_ANY } else { RANKED_FREE };
    // The capabilities' index is read by a bitmap scan, and the ranking
    // sorted, which the near read's planning otherwise rules out.
    let bitmaps = "SELECT set_config('enable_bitmapscan', 'on', true), set_config('enable_sort', 'on', true)";
    let [_, _, found, _] =
        sql::pipeline(c, [(CUSTOM, &[]), (bitmaps, &[]), (statement, &params[..]), (AS_BEFORE, &[])]).await?;
    let mut ids = BTreeSet::new();
    let (mut matching, mut last_gap, mut ranked) = (0.0, 0.0f64, 0i64);
    for r in &found {
        let (row, id, value): (i32, Option<Uuid>, f64) = (r.get("kind"), r.get("host"), r.get("value"));
        match row {
            0 => matching = value,
            _ => {
                last_gap = last_gap.max(value);
                ranked += 1;
                ids.extend(id);
            }
        }
    }
    if matching >= up_to as f64 {
        return Ok(None);
    }
    // Fewer than asked: every usable host holding the texts was ranked.
    // Otherwise a host left out is looser than the last (ties are kept).
    let complete = ranked < rows && !series;
    let bound = match ranked < rows {
        true => GAP_HORIZON.checked_add(&GAP_HORIZON).unwrap_or(Duration::MAX),
        false => seconds(last_gap),
    };
    // The ranking is the whole read: its depth raises its bound.
    Ok(Some(Near { ids: ids.into_iter().collect(), bound, lists: bound, complete, tightest: None }))
}
