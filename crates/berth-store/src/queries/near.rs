//! The few hosts a new whole-host lease is decided on, found through
//! indexes rather than by reading every host enrolled: best fit
//! (`berth_core::schedule`) takes the free host whose free time around the
//! window is tightest, so the hosts worth reading are those free over the
//! window whose last hold ends nearest before it, those whose next hold
//! starts nearest after it, and, for when no hold is near, a few other free
//! hosts (from a point the lease's draw picks, or by name). Each list is a
//! scan of one index in the order best fit ranks by, bounded by a row
//! count; the hosts the lists name are ranked by their gap in SQL and only
//! the tightest few are read whole; so a creation reads about the same on
//! 100 hosts as on 100,000.
//!
//! Every filter here is necessary for a host to be placed on, never
//! sufficient: a host left out could not have been chosen, and the hosts
//! read are still decided on by berth-core's rules (`queries::fit`).
//! [`Near::bound`] says how tight a host not read can be, so the caller
//! knows whether its choice among the hosts read is the one best fit makes
//! among all of them.

use std::collections::BTreeSet;

use berth_core::lease::Demand;
use berth_core::schedule::GAP_HORIZON;
use berth_core::Window;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::sql::{self, Statement};
use crate::StoreError;

/// `h`, a host, may be placed on by a lease of `$4`: reservable, enabled
/// (Nova's COMPUTE_STATUS_DISABLED too), holding the texts `$5` the
/// demand's properties require, and not kept for other projects (a
/// project named in a list kept as a string holds it as a substring).
///
/// Each `NOT EXISTS` here and in [`free!`] is fenced by `OFFSET 0`, which
/// keeps PostgreSQL from turning it into an anti-join: a probe of one
/// host's rows per host read, where a merge anti-join against a list that
/// stops after a few hosts scanned the whole index up to the first of
/// them (17 ms of a 20 ms near read at 10,000 hosts, from a draw's point).
macro_rules! usable {
    () => {
        " h.reservable AND NOT h.disabled AND h.capabilities @> $5
          AND NOT EXISTS (SELECT 1 FROM provider_traits t
                          WHERE t.provider_uuid = h.provider_uuid AND t.trait = 'COMPUTE_STATUS_DISABLED'
                          OFFSET 0)
          AND (NOT h.capabilities ? 'authorized_projects'
               OR CASE jsonb_typeof(h.capabilities->'authorized_projects')
                  WHEN 'string' THEN strpos(h.capabilities->>'authorized_projects', $4) > 0
                  WHEN 'array' THEN h.capabilities->'authorized_projects' @> jsonb_build_array($4::text)
                  ELSE false END) "
    };
}
pub(crate) use usable;

/// The texts every host a demand may use holds, as `usable!` takes them.
pub(crate) fn required(demand: &Demand) -> Value {
    let query = match demand {
        Demand::Hosts { resource_properties, .. } | Demand::Slots { resource_properties, .. } => {
            resource_properties.as_ref()
        }
        Demand::Nothing => None,
    };
    let texts = query.map(|q| q.required_texts()).unwrap_or_default();
    texts.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<_, _>>().into()
}

/// `h` holds nothing of any class it has, and no maintenance, over
/// `c.around`: the window `[$1, $2)` widened on both sides by no more than
/// the host's cleaning time (the smaller of the default, `$3` seconds, and
/// its own when it is a plain count of minutes; none otherwise).
macro_rules! free {
    () => {
        " NOT EXISTS (SELECT 1 FROM allocations o
                      WHERE o.provider_uuid = h.provider_uuid AND o.during && c.around
                        AND EXISTS (SELECT 1 FROM inventories i
                                    WHERE i.provider_uuid = o.provider_uuid AND i.resource_class = o.resource_class)
                      OFFSET 0)
          AND NOT EXISTS (SELECT 1 FROM maintenance_windows m
                          WHERE m.provider_uuid = h.provider_uuid AND m.during && c.around OFFSET 0) "
    };
}
pub(crate) use free;

/// The window widened by the host's cleaning time, as [`free!`] reads it.
macro_rules! around {
    () => {
        " CROSS JOIN LATERAL (
             SELECT tstzrange($1::timestamptz - by, $2::timestamptz + by, '[)') AS around
             FROM (SELECT CASE WHEN NOT h.capabilities ? 'cleaning_time' THEN make_interval(secs => $3)
                               WHEN h.capabilities->>'cleaning_time' ~ '^[0-9]{1,8}$'
                               THEN least(make_interval(secs => $3),
                                          make_interval(mins => (h.capabilities->>'cleaning_time')::int))
                               ELSE interval '0' END AS by) b
         ) c "
    };
}
pub(crate) use around;

/// Holds, `$6` rows each way, of the hosts `$held` keeps, within best fit's horizon
/// (`GAP_HORIZON`, a year, beyond which every gap counts the same):
/// `before`, ending at or before `$1`, latest first; `after`, starting at
/// or after `$2`, earliest first. Rows answered: 0 and 1, each list's last
/// instant and length; 2, the hosts of either list that pass `$listed`
/// (free over the window, for a lease of one window), ranked by their gap
/// around the window ([`listed_gap!`]), the `$8` tightest and every host
/// tied with the last, each once with its gap in seconds; then `$others`:
/// 3, up to `$7` other usable free hosts. Ranking in SQL is the threshold
/// algorithm's random access: a host of one list is probed for its hold on
/// the other side by key, so only the few tightest are read whole
/// (`queries::fit::gather`), however long the lists had to run. The
/// hosts are ranked first and checked free in that order (the ranked
/// subquery is fenced and sorted), so the free check probes only as far
/// down the ranking as the answer reaches.
///
/// `$held`: [`BY_USABLE`] keeps only usable hosts' holds in the lists, for
/// a demand whose properties keep few hosts; [`ANY_HOLD`] keeps every hold,
/// for a demand that names none: each row is then an index entry alone,
/// not a host's look-up and probe, and whether a host is usable is checked
/// in rank order with the rest of `$listed`. Either way a host not in a
/// list has no hold in the span it covers, so the bound holds.
macro_rules! near {
    ($held:expr, $listed:expr, $others:expr) => {
        concat!(
            "WITH before AS MATERIALIZED (
                 SELECT a.provider_uuid, upper(a.during) AS at
                 FROM allocations a",
            $held,
            "    lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL AND upper(a.during) <= $1
                   AND upper(a.during) > $1::timestamptz - interval '8760 hours'
                 ORDER BY upper(a.during) DESC LIMIT $6
             ), after AS MATERIALIZED (
                 SELECT a.provider_uuid, lower(a.during) AS at
                 FROM allocations a",
            $held,
            "    upper(a.during) IS NOT NULL AND lower(a.during) >= $2
                   AND lower(a.during) < $2::timestamptz + interval '8760 hours'
                 ORDER BY lower(a.during) LIMIT $6
             )
             SELECT 0 AS list, NULL::uuid AS host, min(at) AS at, count(*) AS n, NULL::float8 AS gap FROM before
             UNION ALL SELECT 1, NULL::uuid, max(at), count(*), NULL::float8 FROM after
             UNION ALL
             (SELECT 2, h.provider_uuid, NULL::timestamptz, 0::int8, h.gap
              FROM (SELECT h.*, extract(epoch FROM",
            listed_gap!(),
            ")::float8 AS gap
                    FROM (SELECT provider_uuid, max(b) AS b, min(a) AS a
                          FROM (SELECT provider_uuid, at AS b, NULL::timestamptz AS a FROM before
                                UNION ALL SELECT provider_uuid, NULL::timestamptz, at FROM after) u
                          GROUP BY provider_uuid) s
                    JOIN hosts h ON h.provider_uuid = s.provider_uuid
                    ORDER BY gap OFFSET 0) h",
            $listed,
            " ORDER BY h.gap FETCH FIRST $8 ROWS WITH TIES)
             UNION ALL ",
            $others
        )
    };
}

/// The gap around `[$1, $2)` of a listed host `h` as `Candidate::gap`
/// counts it, each side at most a year: the side a list holds is its
/// first row there (`s.b`, `s.a`: a list is every usable host's holds in
/// order up to where it stops, so a host's nearest hold that way comes
/// first); the other side, a probe of the host's own holds
/// (`allocations_provider_upper` / `_lower`), made only when that list
/// did not hold it.
macro_rules! listed_gap {
    () => {
        " least(coalesce($1::timestamptz - s.b,
                          $1::timestamptz - (SELECT max(upper(a.during)) FROM allocations a
                                             WHERE a.provider_uuid = h.provider_uuid AND upper(a.during) <= $1),
                          interval '8760 hours'), interval '8760 hours')
          + least(coalesce(s.a - $2::timestamptz,
                           (SELECT min(lower(a.during)) FROM allocations a
                            WHERE a.provider_uuid = h.provider_uuid AND lower(a.during) >= $2) - $2::timestamptz,
                           interval '8760 hours'), interval '8760 hours') "
    };
}

/// [`near!`]'s lists of usable hosts' holds.
macro_rules! by_usable {
    () => {
        concat!(" JOIN hosts h ON h.provider_uuid = a.provider_uuid WHERE", usable!(), " AND ")
    };
}

/// [`near!`]'s lists of every hold.
macro_rules! any_hold {
    () => {
        " WHERE "
    };
}

/// [`near!`]'s listed hosts for a lease of one window: the usable ones
/// free over it.
macro_rules! free_over_it {
    () => {
        concat!(around!(), " WHERE", usable!(), " AND", free!())
    };
}

/// [`near!`]'s listed hosts for a series: the usable ones.
macro_rules! usable_listed {
    () => {
        concat!(" WHERE", usable!())
    };
}

/// [`near!`]'s other hosts from the uuid `$9` on, wrapping round: where
/// best fit breaks ties by a draw (`Store::with_drawn_ties`), a draw's own
/// point, so that creations at once read different hosts.
macro_rules! others_drawn {
    () => {
        concat!(
            "(SELECT 3, h.provider_uuid, NULL::timestamptz, 0::int8, NULL::float8 FROM hosts h",
            around!(),
            " WHERE h.provider_uuid >= $9 AND",
            usable!(),
            " AND",
            free!(),
            " ORDER BY h.provider_uuid LIMIT $7)
             UNION ALL
             (SELECT 3, h.provider_uuid, NULL::timestamptz, 0::int8, NULL::float8 FROM hosts h",
            around!(),
            " WHERE h.provider_uuid < $9 AND",
            usable!(),
            " AND",
            free!(),
            " ORDER BY h.provider_uuid LIMIT $7)"
        )
    };
}

/// [`near!`]'s other hosts by name: where best fit breaks ties by name.
macro_rules! others_by_name {
    () => {
        concat!(
            "(SELECT 3, h.provider_uuid, NULL::timestamptz, 0::int8, NULL::float8
              FROM providers p JOIN hosts h ON h.provider_uuid = p.uuid",
            around!(),
            " WHERE",
            usable!(),
            " AND",
            free!(),
            " ORDER BY p.name LIMIT $7)"
        )
    };
}

/// The near statements, by whether the lists keep usable hosts' holds or
/// every hold (`[BY_USABLE, ANY_HOLD]`), and how best fit breaks ties.
const NEAR_DRAWN: [&str; 2] =
    [near!(by_usable!(), free_over_it!(), others_drawn!()), near!(any_hold!(), free_over_it!(), others_drawn!())];
const NEAR_BY_NAME: [&str; 2] =
    [near!(by_usable!(), free_over_it!(), others_by_name!()), near!(any_hold!(), free_over_it!(), others_by_name!())];

/// For a series of windows (a recurring lease), ranked around its first
/// (`schedule::place_ranked`): the listed hosts whether or not free over
/// the first window, since each may be free over the others.
const SERIES_DRAWN: [&str; 2] =
    [near!(by_usable!(), usable_listed!(), others_drawn!()), near!(any_hold!(), usable_listed!(), others_drawn!())];
const SERIES_BY_NAME: [&str; 2] =
    [near!(by_usable!(), usable_listed!(), others_by_name!()), near!(any_hold!(), usable_listed!(), others_by_name!())];
/// Which lists: only usable hosts' holds, or every hold.
const BY_USABLE: usize = 0;
const ANY_HOLD: usize = 1;

/// Keeps the settings [`CUSTOM`] and [`INDEXED`] change, for [`AS_BEFORE`].
macro_rules! saved {
    () => {
        "SELECT set_config('berth.near_saved', concat_ws(',', current_setting('plan_cache_mode'),
                          current_setting('enable_bitmapscan'), current_setting('enable_hashjoin'),
                          current_setting('enable_mergejoin'), current_setting('enable_sort'),
                          current_setting('enable_seqscan'), current_setting('jit')), true)"
    };
}

/// The settings under which only walks of indexes and probes by key are planned.
macro_rules! planned_to_walk_indexes {
    () => {
        " set_config('enable_bitmapscan', 'off', true), set_config('enable_hashjoin', 'off', true),
          set_config('enable_mergejoin', 'off', true), set_config('enable_sort', 'off', true),
          set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
    };
}

/// The near statement is planned for the values at hand, every time. After
/// five runs PostgreSQL may keep a plan made for no values, and that plan,
/// unable to see that each list stops after a few rows, reads every host
/// and probes its holds (over a second at 1,000 hosts with 20,000 leases,
/// against a few ms); planning takes some 3 ms. And it is planned to walk
/// the indexes: each list must be an index scan in its order stopped by
/// its limit, each host a probe by key. Estimates of how many holds a
/// year around the window has are often far too low, and then a bitmap
/// scan of every hold in the year, joined to hosts by a hash over a scan
/// of every host and sorted, looks cheaper (9 to 15 ms at 10,000 hosts,
/// against well under one). JIT is off: the cost those settings add to a
/// plan that must sort anyway passed its threshold, and compiling took
/// 400 ms of a 15 ms statement. Set for these statements only, within the
/// transaction: [`AS_BEFORE`] puts back what was set before, kept in a
/// setting of Berth's own, in the same round trip (outside a transaction
/// nothing was kept, and nothing needs putting back).
pub(crate) const CUSTOM: &str =
    concat!(saved!(), ", set_config('plan_cache_mode', 'force_custom_plan', true),", planned_to_walk_indexes!());
/// As [`CUSTOM`], keeping the plan made for no values where the statement
/// is one whose plan needs none (`queries::spans`: a walk of one index in
/// order, then probes by key).
pub(crate) const INDEXED: &str = concat!(saved!(), ",", planned_to_walk_indexes!());
pub(crate) const AS_BEFORE: &str = "
    SELECT set_config('plan_cache_mode', split_part(s, ',', 1), true),
           set_config('enable_bitmapscan', split_part(s, ',', 2), true),
           set_config('enable_hashjoin', split_part(s, ',', 3), true),
           set_config('enable_mergejoin', split_part(s, ',', 4), true),
           set_config('enable_sort', split_part(s, ',', 5), true),
           set_config('enable_seqscan', split_part(s, ',', 6), true),
           set_config('jit', split_part(s, ',', 7), true)
    FROM current_setting('berth.near_saved', true) s WHERE s <> ''";

/// Rows read each way per host wanted, beyond [`BASE_ROWS`]: a whole-host
/// lease holds a row per class (three, usually).
const ROWS_PER_HOST: i64 = 32;
/// Rows read each way at least, at the first depth: some forty leases each
/// way. A row costs an index entry (and a host's look-up where the lists
/// keep usable hosts' holds only); each host named costs a probe for its
/// gap, and only the best ranked are checked free; so a list can run long.
/// How far it must run for [`Near::bound`] to vouch for the choice grows
/// with how sparse the holds near the window are, so a caller may read
/// again deeper.
const BASE_ROWS: i64 = 128;
/// Other hosts read: enough to choose among by draw or name when no hold is near.
const OTHERS: i64 = 16;

/// Hosts read beside the lists (or ranked, `queries::named_hosts`) for a
/// demand of at most `max` hosts.
pub(crate) fn others(max: u32) -> i64 {
    OTHERS.saturating_add(i64::from(max).saturating_mul(2))
}

/// How far [`read`] looks, each in times the usual: rows each way in its
/// lists (`rows`), and listed hosts ranked and read (`ranked`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Depth {
    pub rows: i64,
    pub ranked: i64,
}

/// What [`read`] found.
pub(crate) struct Near {
    /// The hosts read, each once.
    pub ids: Vec<Uuid>,
    /// No host left out has a gap around the window (`Candidate::gap`)
    /// shorter than this.
    pub bound: Duration,
    /// No host left out of the lists has a gap shorter than this (the
    /// lists' part of [`Near::bound`]: longer lists raise it).
    pub lists: Duration,
    /// Every host that could take the lease was read.
    pub complete: bool,
    /// The smallest gap of a listed host ranked, if any was: no choice
    /// among the hosts read is tighter than this or [`Near::lists`],
    /// whichever is less, so when it is past the lists' bound the read
    /// cannot vouch for any choice and the caller may read deeper at once.
    /// (Through the free spans, `queries::spans`: the nearest span's
    /// distance, which no gap ranked is shorter than.)
    pub tightest: Option<Duration>,
}

impl Near {
    /// The ranking was cut below the lists' bound: more hosts ranked raise
    /// [`Near::bound`] up to [`Near::lists`].
    pub fn cut(&self) -> bool {
        self.bound < self.lists
    }
}

/// A gap SQL gives in seconds, as a duration.
pub(crate) fn seconds(gap: f64) -> Duration {
    Duration::microseconds((gap * 1e6).round() as i64)
}

/// The hosts near the first of `windows` that `demand`, a whole-host
/// demand of a lease of `project`, may be placed on (`None` for any other
/// demand, or a first window without end); for a series (more than one
/// window), whether or not free over the first. `cleaning`: the default
/// cleaning time; `draw`: the lease's draw, which picks where the other
/// hosts are read from (by name without one); `depth`: how far to look.
pub(crate) async fn read(
    c: &impl GenericClient,
    project: &str,
    demand: &Demand,
    windows: &[Window],
    cleaning: Duration,
    draw: Option<u64>,
    depth: Depth,
) -> Result<Option<Near>, StoreError> {
    let (Demand::Hosts { max, .. }, Some(window)) = (demand, windows.first()) else {
        return Ok(None);
    };
    let Some(end) = window.end else {
        return Ok(None);
    };
    let series = windows.len() > 1;
    let required = required(demand);
    let secs = cleaning.num_milliseconds().max(0) as f64 / 1000.0;
    let wanted = i64::from(*max);
    let rows = BASE_ROWS.saturating_add(ROWS_PER_HOST.saturating_mul(wanted)).saturating_mul(depth.rows);
    let others = others(*max);
    let ranked = others.saturating_mul(depth.ranked);
    let from = Uuid::from_u64_pair(draw.unwrap_or(0), 0);
    let params: [&(dyn ToSql + Sync); 9] =
        [&window.start, &end, &secs, &project, &required, &rows, &others, &ranked, &from];
    // Properties that keep few hosts: lists of every hold would walk many
    // holds of hosts the demand cannot use for each one it can.
    let held = if required.as_object().is_some_and(|m| !m.is_empty()) { BY_USABLE } else { ANY_HOLD };
    let near: Statement<'_> = match (draw, series) {
        (Some(_), false) => (NEAR_DRAWN[held], &params[..]),
        (None, false) => (NEAR_BY_NAME[held], &params[..8]),
        (Some(_), true) => (SERIES_DRAWN[held], &params[..]),
        (None, true) => (SERIES_BY_NAME[held], &params[..8]),
    };
    let [_, found, _] = sql::pipeline(c, [(CUSTOM, &[]), near, (AS_BEFORE, &[])]).await?;
    let mut ids = BTreeSet::new();
    let (mut before, mut after, mut more) = ((None, 0), (None, 0), 0i64);
    let (mut listed, mut last_gap, mut first_gap) = (0i64, 0.0f64, None::<f64>);
    for r in &found {
        let (list, id, at, n, gap): (i32, Option<Uuid>, Option<DateTime<Utc>>, i64, Option<f64>) =
            (r.get("list"), r.get("host"), r.get("at"), r.get("n"), r.get("gap"));
        match list {
            0 => before = (at, n),
            1 => after = (at, n),
            2 => {
                let gap = gap.unwrap_or(0.0);
                listed += 1;
                last_gap = last_gap.max(gap);
                first_gap = Some(first_gap.map_or(gap, |f| f.min(gap)));
            }
            _ => more += 1,
        }
        ids.extend(id);
    }
    // A list that came back short holds every usable host it could: a host
    // not read has no hold within the horizon that way. One that came back
    // full stops at its last row: a usable host not read ends its last hold
    // no later (starts its next no sooner) than that.
    let gap_before = match before {
        (Some(at), n) if n >= rows => window.start.signed_duration_since(at).min(GAP_HORIZON),
        _ => GAP_HORIZON,
    };
    let gap_after = match after {
        (Some(at), n) if n >= rows => at.signed_duration_since(end).min(GAP_HORIZON),
        _ => GAP_HORIZON,
    };
    let lists = gap_before.checked_add(&gap_after).unwrap_or(Duration::MAX);
    // The ranking was cut: a listed host not read is no tighter than the
    // last one read (its ties were read).
    let bound = match listed >= ranked {
        true => lists.min(seconds(last_gap)),
        false => lists,
    };
    // Fewer other hosts than asked for: every usable free host was read
    // (for one window: a series may use hosts busy over its first).
    let complete = more < others && !series;
    let tightest = first_gap.map(seconds);
    Ok(Some(Near { ids: ids.into_iter().collect(), bound, lists, complete, tightest }))
}
