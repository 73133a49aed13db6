//! The candidates' timelines, read in one round trip: the providers, their
//! inventories, the holds of others over a span and the nearest on either
//! side of a window, as prepared statements sent together (optionally after
//! the statements that lock them, so that what is read is what the locks
//! protect). `queries::fit` decides on what they read.

use std::collections::{BTreeMap, HashMap};

use berth_core::host::{self, Enrolment, Host};
use berth_core::schedule::Candidate;
use berth_core::Window;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::client::GenericClient;
use crate::{sql, StoreError};

#[cfg(test)]
#[path = "timelines_plan_tests.rs"]
mod plan_tests;

/// A statement over `ids`, the providers read: those of `$1`, and every
/// enrolled host when `$2`.
macro_rules! over_ids {
    ($($select:expr),+) => {
        concat!(
            "WITH ids AS (SELECT uuid FROM providers WHERE uuid = ANY($1) UNION SELECT provider_uuid FROM hosts WHERE $2)",
            $($select),+
        )
    };
}

/// The columns of [`HOSTS`] and [`EVERY_HOST`], over `p` (providers) and
/// `h` (hosts).
macro_rules! host_columns {
    () => {
        " SELECT p.uuid, p.name,
            CASE WHEN h.provider_uuid IS NOT NULL THEN h.reservable AND NOT h.disabled AND NOT EXISTS (
                SELECT 1 FROM provider_traits t
                WHERE t.provider_uuid = p.uuid AND t.trait = 'COMPUTE_STATUS_DISABLED') END AS reservable,
            h.capabilities,
            ARRAY(SELECT t.trait FROM provider_traits t WHERE t.provider_uuid = p.uuid) AS traits"
    };
}

/// The providers read, named, with their host data where enrolled (a
/// probe per provider, fenced by `OFFSET 0`, as in [`INVENTORIES`]). An
/// unusable host (disabled, or its provider has Nova's
/// COMPUTE_STATUS_DISABLED trait: commands::heal) is placed nowhere.
const HOSTS: &str = over_ids!(
    host_columns!(),
    "
     FROM ids CROSS JOIN LATERAL (SELECT * FROM providers WHERE uuid = ids.uuid OFFSET 0) p
     LEFT JOIN LATERAL (SELECT * FROM hosts WHERE provider_uuid = ids.uuid OFFSET 0) h ON true"
);

/// One probe of the inventories' key per provider (fenced by `OFFSET 0`):
/// a hash join read every inventory of the cloud to find a few hosts'.
const INVENTORIES: &str = over_ids!(
    " SELECT i.provider_uuid, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
            i.allocation_ratio
     FROM ids CROSS JOIN LATERAL (SELECT * FROM inventories WHERE provider_uuid = ids.uuid OFFSET 0) i"
);

/// [`HOSTS`] when every enrolled host is read: joined, not probed. On
/// 100 hosts the probes ran as a sequential scan of `providers` per host
/// (1.07 ms against 0.27 ms joined, under EXPLAIN ANALYZE); the planner
/// is free to probe where the hosts are few beside the providers.
const EVERY_HOST: &str = over_ids!(
    host_columns!(),
    "
     FROM ids JOIN providers p ON p.uuid = ids.uuid LEFT JOIN hosts h ON h.provider_uuid = p.uuid"
);

/// [`INVENTORIES`] when every enrolled host is read, joined as in
/// [`EVERY_HOST`].
const EVERY_HOST_INVENTORIES: &str = over_ids!(
    " SELECT i.provider_uuid, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
            i.allocation_ratio
     FROM ids JOIN inventories i ON i.provider_uuid = ids.uuid"
);

/// The statements reading the providers and their inventories: probes for
/// a few named, joins for every host (each planned for its own case, since
/// a prepared statement's generic plan cannot tell the two apart).
fn provider_reads(every_host: bool) -> [&'static str; 2] {
    if every_host {
        [EVERY_HOST, EVERY_HOST_INVENTORIES]
    } else {
        [HOSTS, INVENTORIES]
    }
}

/// One probe of the timeline index per provider (fenced by `OFFSET 0`, so
/// that no plan made on a nearly empty table scans it instead), bounded by
/// the provider and the span: the cost follows what overlaps the span, not
/// what the provider carries in all; kept are the holds of classes it has
/// an inventory of. The span `[$3, $4)` is widened on both sides by the
/// host's cleaning time (`Candidate::clean_after`): read here, before the
/// host's data is, as at least the larger of the default (`$6`, seconds)
/// and the first run of digits it names, and without bound when that run
/// is too long to be minutes worth bounding: so never less than
/// `host::cleaning_time` makes it; worked out once per provider. A
/// maintenance window holds more than any host has, of each class.
const HOLDS: &str = over_ids!(
    ", span AS MATERIALIZED (
         SELECT ids.uuid, CASE WHEN length(d.digits) > 8 THEN tstzrange(NULL, NULL)
                               ELSE tstzrange($3::timestamptz - d.by, $4::timestamptz + d.by, '[)') END AS during
         FROM ids LEFT JOIN LATERAL (SELECT capabilities FROM hosts WHERE provider_uuid = ids.uuid OFFSET 0) h ON true
         CROSS JOIN LATERAL (SELECT substring(h.capabilities->>'cleaning_time' FROM '[0-9]+') AS digits) c
         CROSS JOIN LATERAL (
             SELECT c.digits, greatest(make_interval(secs => $6),
                                       CASE WHEN length(c.digits) <= 8 THEN make_interval(mins => c.digits::int) END) AS by
         ) d
     )
     SELECT a.provider_uuid, a.resource_class, lower(a.during) AS start_at, upper(a.during) AS end_at, a.used
     FROM span CROSS JOIN LATERAL (
         SELECT provider_uuid, resource_class, during, used FROM allocations
         WHERE provider_uuid = span.uuid AND during && span.during AND consumer_uuid <> ALL($5)
         OFFSET 0
     ) a
     WHERE EXISTS (SELECT 1 FROM inventories i
                   WHERE i.provider_uuid = a.provider_uuid AND i.resource_class = a.resource_class)
     UNION ALL
     SELECT i.provider_uuid, i.resource_class, lower(m.during), upper(m.during), 1::int8 << 40
     FROM span JOIN maintenance_windows m ON m.provider_uuid = span.uuid AND m.during && span.during
     JOIN inventories i ON i.provider_uuid = span.uuid"
);

/// Per provider: the nearest holds of others on either side of the window
/// `[$3, $4)`.
const GAPS: &str = over_ids!(
    " SELECT ids.uuid,
        (SELECT max(upper(a.during)) FROM allocations a
          WHERE a.provider_uuid = ids.uuid AND upper(a.during) <= $3 AND a.consumer_uuid <> ALL($5)) AS previous_end,
        (SELECT min(lower(a.during)) FROM allocations a
          WHERE a.provider_uuid = ids.uuid AND lower(a.during) >= $4 AND a.consumer_uuid <> ALL($5)) AS next_start
     FROM ids"
);

/// The end of the hold before the window, the start of the one after.
type Gap = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// What [`read`] read, before the candidates are picked.
pub(crate) struct Timelines {
    pub hosts: BTreeMap<Uuid, Host>,
    holds: HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>>,
    gaps: HashMap<Uuid, Gap>,
    cleaning: Duration,
    /// The rows of the last statement sent before the reads (a lock's).
    pub before: Vec<Row>,
}

pub(crate) use crate::sql::Statement;

/// Where to read and what to leave out.
pub(crate) struct Over<'a> {
    /// These providers (those that still exist)...
    pub ids: &'a [Uuid],
    /// ...and every enrolled host.
    pub every_host: bool,
    /// The holds overlapping it are read (widened by cleaning times).
    pub span: Window,
    /// The nearest holds on either side of it are read (best fit).
    pub near: Window,
    /// Consumers whose holds are not counted.
    pub own: &'a [Uuid],
    /// The cleaning time of hosts that name none.
    pub cleaning: Duration,
}

/// The parameters of the statements that read `over`, for a caller to send
/// them with others ([`Reads::statements`]) and make [`Timelines`] of their
/// rows ([`Reads::timelines`]).
pub(crate) struct Reads<'a> {
    over: &'a Over<'a>,
    near_end: DateTime<Utc>,
    secs: f64,
}

/// The parameter lists of [`Reads`]' statements.
pub(crate) struct ReadParams<'a> {
    every_host: bool,
    span: [&'a (dyn ToSql + Sync); 6],
    around: [&'a (dyn ToSql + Sync); 5],
}

impl<'a> Reads<'a> {
    pub(crate) fn new(over: &'a Over<'a>) -> Reads<'a> {
        let near_end = over.near.end.unwrap_or(over.near.start);
        let secs = over.cleaning.num_milliseconds().max(0) as f64 / 1000.0;
        Reads { over, near_end, secs }
    }

    pub(crate) fn params(&self) -> ReadParams<'_> {
        let o = self.over;
        ReadParams {
            every_host: o.every_host,
            span: [&o.ids, &o.every_host, &o.span.start, &o.span.end, &o.own, &self.secs],
            around: [&o.ids, &o.every_host, &o.near.start, &self.near_end, &o.own],
        }
    }

    /// What the rows of [`ReadParams::statements`] say; `before`: the rows
    /// of a statement sent before them, kept in [`Timelines::before`].
    pub(crate) fn timelines(&self, rows: [Vec<Row>; 4], before: Vec<Row>) -> Timelines {
        let [host_rows, inventory_rows, hold_rows, gap_rows] = rows;
        let hosts = hosts_from(host_rows, inventory_rows);
        let mut holds: HashMap<Uuid, BTreeMap<String, Vec<(Window, i64)>>> = HashMap::new();
        for r in hold_rows {
            let w = Window { start: r.get("start_at"), end: r.get("end_at") };
            let class = holds.entry(r.get("provider_uuid")).or_default().entry(r.get("resource_class"));
            class.or_default().push((w, r.get("used")));
        }
        let gaps = gap_rows.iter().map(|r| (r.get("uuid"), (r.get("previous_end"), r.get("next_start")))).collect();
        Timelines { hosts, holds, gaps, cleaning: self.over.cleaning, before }
    }
}

impl ReadParams<'_> {
    /// The four statements, in the order [`Reads::timelines`] takes their rows.
    pub(crate) fn statements(&self) -> [Statement<'_>; 4] {
        let [hosts, inventories] = provider_reads(self.every_host);
        [(hosts, &self.span[..2]), (inventories, &self.span[..2]), (HOLDS, &self.span[..]), (GAPS, &self.around[..])]
    }
}

/// Reads `over`, after the statements `before` (at most two) in the same
/// round trip; the last of them answers in [`Timelines::before`].
pub(crate) async fn read(
    c: &impl GenericClient,
    before: &[Statement<'_>],
    over: &Over<'_>,
) -> Result<Timelines, StoreError> {
    let reads = Reads::new(over);
    let params = reads.params();
    let [a, b, c2, d] = params.statements();
    let (before, rows) = match before {
        [] => (Vec::new(), sql::pipeline(c, [a, b, c2, d]).await?),
        [one] => {
            let [x, a, b, c, d] = sql::pipeline(c, [*one, a, b, c2, d]).await?;
            (x, [a, b, c, d])
        }
        [one, two] => {
            let [_, x, a, b, c, d] = sql::pipeline(c, [*one, *two, a, b, c2, d]).await?;
            (x, [a, b, c, d])
        }
        _ => unreachable!("at most two statements before the reads"),
    };
    Ok(reads.timelines(rows, before))
}

/// The providers `ids` and, when `every_host`, every enrolled host: named,
/// with their inventories and host data where enrolled (the same statements
/// [`read`] sends).
pub(crate) async fn hosts(
    c: &impl GenericClient,
    ids: &[Uuid],
    every_host: bool,
) -> Result<BTreeMap<Uuid, Host>, StoreError> {
    let params = [&ids as &(dyn ToSql + Sync), &every_host];
    let [hosts, inventories] = provider_reads(every_host);
    let [host_rows, inventory_rows] = sql::pipeline(c, [(hosts, &params[..]), (inventories, &params[..])]).await?;
    Ok(hosts_from(host_rows, inventory_rows))
}

/// The rows of [`HOSTS`] and [`INVENTORIES`] as hosts.
fn hosts_from(host_rows: Vec<Row>, inventory_rows: Vec<Row>) -> BTreeMap<Uuid, Host> {
    let mut hosts: BTreeMap<Uuid, Host> = BTreeMap::new();
    for r in host_rows {
        let reservable: Option<bool> = r.get("reservable");
        let caps: Option<Value> = r.get("capabilities");
        let enrolment = reservable.map(|reservable| Enrolment {
            reservable,
            capabilities: caps.and_then(|c| serde_json::from_value(c).ok()).unwrap_or_default(),
        });
        let traits: Vec<String> = r.get("traits");
        hosts.insert(
            r.get("uuid"),
            Host { name: r.get("name"), enrolment, inventories: BTreeMap::new(), traits: traits.into_iter().collect() },
        );
    }
    for r in inventory_rows {
        if let Some(h) = hosts.get_mut(&r.get::<_, Uuid>("provider_uuid")) {
            h.inventories.insert(r.get("resource_class"), super::inventory(&r));
        }
    }
    hosts
}

impl Timelines {
    /// The candidates, in uuid order: the providers read that `keep` keeps,
    /// each keeping its cleaning time after every lease.
    pub(crate) fn into_candidates(
        mut self,
        keep: impl Fn(&Uuid, &Host) -> bool,
    ) -> (BTreeMap<Uuid, Host>, Vec<Candidate>, HashMap<Uuid, usize>) {
        self.hosts.retain(|id, h| keep(id, h));
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut index: HashMap<Uuid, usize> = HashMap::new();
        for (id, h) in &self.hosts {
            let (previous_end, next_start) = self.gaps.get(id).copied().unwrap_or((None, None));
            index.insert(*id, candidates.len());
            let mut c = Candidate {
                provider: *id,
                name: h.name.clone(),
                inventories: h.inventories.clone(),
                holds: self.holds.remove(id).unwrap_or_default(),
                previous_end,
                next_start,
                preferred: false,
                cleaning: Duration::zero(),
            };
            c.clean_after(host::cleaning_time(h, self.cleaning));
            candidates.push(c);
        }
        (self.hosts, candidates, index)
    }
}
