//! The hosts tightest around a window, found through each host's free
//! spans (`host_free_spans`, kept at commit by the database; see its
//! migration): a span is a point (free from, free until), and the spans
//! holding the window `[s, e)` are those up and to the left of the point
//! `(s, e)`. Best fit's gap for a host free over the window is the
//! distance along both axes from its span to that point (each side capped
//! at a year), never less than the straight-line distance, so a walk of
//! the spans' GiST index nearest first reaches the tightest hosts first,
//! and a host not walked has a gap at least as long as the last span
//! walked. The walk costs the same on 100 hosts as on 100,000.
//!
//! As in `queries::near`, SQL only narrows: the hosts walked are checked
//! usable and free (the walk knows neither properties nor cleaning time),
//! read whole, and decided on by berth-core; [`Near::bound`] vouches for
//! the choice.

use std::collections::BTreeSet;

use berth_core::lease::Demand;
use berth_core::schedule::GAP_HORIZON;
use berth_core::Window;
use chrono::Duration;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::near::{around, free, required, usable, Near, AS_BEFORE, INDEXED};
use crate::client::GenericClient;
use crate::sql;
use crate::StoreError;

#[cfg(test)]
#[path = "spans_plan_tests.rs"]
mod plan_tests;

/// An instant in seconds since the epoch, as the spans' points hold it.
macro_rules! epoch {
    ($at:literal) => {
        concat!("extract(epoch FROM ", $at, "::timestamptz)::float8")
    };
}

/// The window `[$1, $2)` as a point. Written out where it is used (not
/// read from a subquery), so that the index walk is ordered by distance
/// to it: a point from another relation leaves every span holding the
/// window to be read and sorted (20 ms at 10,000 hosts, against 0.2).
macro_rules! window_point {
    () => {
        concat!("point(", epoch!("$1"), ", ", epoch!("$2"), ")")
    };
}

/// Rows: 0, the distance of the last span walked and how many were; 1,
/// the usable hosts free over `[$1, $2)` among them, nearest first, the
/// `$7` nearest and their ties, each with its distance in seconds. The
/// walk takes `$6` spans and every span as near as the last, so a host
/// not walked is strictly farther.
const NEAREST: &str = concat!(
    "WITH walk AS MATERIALIZED (
         SELECT f.provider_uuid, f.spot <-> ",
    window_point!(),
    " AS d
         FROM host_free_spans f
         WHERE f.spot <@ box(point(-1e16, ",
    epoch!("$2"),
    "), point(",
    epoch!("$1"),
    ", 1e16))
         ORDER BY f.spot <-> ",
    window_point!(),
    " FETCH FIRST $6 ROWS WITH TIES
     )
     SELECT 0 AS kind, NULL::uuid AS host, max(d) AS d, count(*) AS n FROM walk
     UNION ALL
     (SELECT 1, h.provider_uuid, w.d, 0::int8
      FROM (SELECT * FROM walk ORDER BY d OFFSET 0) w
      CROSS JOIN LATERAL (SELECT * FROM hosts WHERE provider_uuid = w.provider_uuid OFFSET 0) h",
    around!(),
    " WHERE",
    usable!(),
    " AND",
    free!(),
    " ORDER BY w.d FETCH FIRST $7 ROWS WITH TIES)"
);

/// The bound's most when the walk or the ranking was cut: a host not read
/// with a side capped at a year ties with a choice of a year, so only a
/// choice tighter than that is vouched for.
const SHORT_OF_A_YEAR: Duration = Duration::microseconds(GAP_HORIZON.num_microseconds().unwrap() - 1);

/// Spans walked per host ranked: a margin for hosts walked that the lease
/// may not use (its properties, maintenance, cleaning time).
const WALKED_PER_RANKED: i64 = 4;

/// Hosts ranked at the first depth for a demand of at most `max` hosts:
/// as many as the near read reads beside its lists. The store's own tests
/// rank fewer, so that their clouds of some forty hosts cut both the walk
/// and the ranking, and the bound must vouch for the choice.
#[cfg(not(test))]
fn ranked(max: u32) -> i64 {
    super::near::others(max)
}
#[cfg(test)]
fn ranked(max: u32) -> i64 {
    i64::from(max) + 1
}

/// The hosts nearest the window of `demand`, a whole-host demand of a
/// lease of `project` over one window with an end (`None` otherwise), as
/// `near::read` reads them: `depth` times the usual. `Near::tightest` is
/// the distance of the nearest host ranked: no choice among them is
/// tighter.
pub(crate) async fn read(
    c: &impl GenericClient,
    project: &str,
    demand: &Demand,
    windows: &[Window],
    cleaning: Duration,
    depth: i64,
) -> Result<Option<Near>, StoreError> {
    let (Demand::Hosts { max, .. }, [window]) = (demand, windows) else {
        return Ok(None);
    };
    let Some(end) = window.end else {
        return Ok(None);
    };
    let required = required(demand);
    let secs = cleaning.num_milliseconds().max(0) as f64 / 1000.0;
    let ranked = ranked(*max).saturating_mul(depth);
    let walked = ranked.saturating_mul(WALKED_PER_RANKED);
    let params: [&(dyn ToSql + Sync); 7] = [&window.start, &end, &secs, &project, &required, &walked, &ranked];
    let [_, found, _] = sql::pipeline(c, [(INDEXED, &[]), (NEAREST, &params[..]), (AS_BEFORE, &[])]).await?;
    let (mut last_walked, mut n_walked) = (0.0f64, 0i64);
    let (mut ids, mut nearest, mut last_ranked, mut n_ranked) = (BTreeSet::new(), None::<f64>, 0.0f64, 0i64);
    for r in &found {
        let (kind, id, d, n): (i32, Option<Uuid>, Option<f64>, i64) =
            (r.get("kind"), r.get("host"), r.get("d"), r.get("n"));
        let d = d.unwrap_or(0.0);
        match kind {
            0 => (last_walked, n_walked) = (d, n),
            _ => {
                nearest = Some(nearest.map_or(d, |f| f.min(d)));
                last_ranked = last_ranked.max(d);
                n_ranked += 1;
                ids.extend(id);
            }
        }
    }
    // A host not walked is farther than the last span walked; one walked
    // and not ranked, farther than the last ranked (ties are kept); and its
    // gap is at least its distance, or a year where a side is capped: so
    // looser than the bound, which stops short of a year.
    let (walk_cut, rank_cut) = (n_walked >= walked, n_ranked >= ranked);
    let mut bound = GAP_HORIZON.checked_add(&GAP_HORIZON).unwrap_or(Duration::MAX);
    if walk_cut {
        bound = bound.min(below(last_walked));
    }
    if rank_cut {
        bound = bound.min(below(last_ranked));
    }
    if walk_cut || rank_cut {
        bound = bound.min(SHORT_OF_A_YEAR);
    }
    let complete = !walk_cut && !rank_cut;
    // Every host ranked is at least as far as the nearest one.
    let tightest = nearest.map(below);
    Ok(Some(Near { ids: ids.into_iter().collect(), bound, lists: bound, complete, tightest }))
}

/// A distance in seconds as a duration no longer than it: gaps are whole
/// microseconds, so one longer than the distance is longer than this too.
fn below(distance: f64) -> Duration {
    Duration::microseconds((distance * 1e6).floor() as i64)
}
