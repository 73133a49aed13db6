//! Where and when hosts are free, found through indexes rather than by
//! reading every host: the usable hosts free over a window, a bounded few
//! of them (`FREE_HOSTS`); and the instants at which holds on usable hosts
//! end, in order, a page at a time (`ENDS`). Availability advice
//! (`queries::advice`) tries a lease at `from` and at those instants, each
//! on the few hosts free then, so its cost follows the windows it tries,
//! not the size of the cloud.
//!
//! As in `queries::near`, SQL only narrows: every filter is necessary for a
//! host to take a lease, never sufficient, and berth-core's rules decide on
//! the hosts read.

use std::collections::{BTreeSet, HashMap};

use berth_core::host;
use berth_core::lease::Demand;
use berth_core::Window;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::near::{around, free, required, usable};
use super::timelines;
use crate::client::GenericClient;
use crate::sql::{self, Statement};
use crate::StoreError;

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
#[path = "free_ends_tests.rs"]
mod ends_tests;
#[cfg(test)]
#[path = "free_plan_tests.rs"]
mod plan_tests;

/// Up to `$6` usable hosts (see `queries::near`) free over the window
/// `[$1, $2)` widened by their cleaning time, in uuid order.
const FREE_HOSTS: &str = concat!(
    "SELECT h.provider_uuid FROM hosts h",
    around!(),
    " WHERE",
    usable!(),
    " AND",
    free!(),
    " ORDER BY h.provider_uuid LIMIT $6"
);

/// The next `$4` ends of holds (bounded allocations of a class the host
/// has, and maintenance windows) on hosts that are reservable, enabled and
/// hold the texts of one of `$3`, each with its host, in the order of end
/// then host, after the pair (`$1`, `$5`) and no later than `$2`; each pair
/// once, with whether the host names a cleaning time of its own (`own`,
/// looked up apart: carried through the `DISTINCT`s it made them sort).
/// A page is a walk of `allocations_bounded_end_host` (V67) in its order.
const ENDS: &str = "
    SELECT at, host, (SELECT capabilities ? 'cleaning_time' FROM hosts WHERE provider_uuid = host) AS own
    FROM (SELECT DISTINCT at, host FROM (
        (SELECT DISTINCT upper(a.during) AS at, a.provider_uuid AS host
         FROM allocations a JOIN hosts h ON h.provider_uuid = a.provider_uuid
         WHERE lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL
           AND upper(a.during) >= $1 AND upper(a.during) <= $2
           AND (upper(a.during), a.provider_uuid) > ($1, $5)
           AND h.reservable AND NOT h.disabled AND h.capabilities @> ANY($3)
           AND EXISTS (SELECT 1 FROM inventories i
                       WHERE i.provider_uuid = a.provider_uuid AND i.resource_class = a.resource_class)
         ORDER BY 1, 2 LIMIT $4)
        UNION ALL
        (SELECT DISTINCT upper(m.during), m.provider_uuid
         FROM maintenance_windows m JOIN hosts h ON h.provider_uuid = m.provider_uuid
         WHERE upper(m.during) >= $1 AND upper(m.during) <= $2
           AND (upper(m.during), m.provider_uuid) > ($1, $5)
           AND h.reservable AND NOT h.disabled AND h.capabilities @> ANY($3)
         ORDER BY 1, 2 LIMIT $4)
    ) e ORDER BY at, host LIMIT $4) p ORDER BY at, host";

/// Rows of [`ENDS`] read at once: the first page, then four times as many
/// each time up to [`PAGE`]. A page costs its hosts' reads too; advice
/// asking a few start times needs a few ends past them (more where a
/// cleaning time moves them later), and at 100,000 hosts with a million
/// leases a page of 256 read that many hosts from all over the table for
/// four instants.
const FIRST_PAGE: i64 = 16;
const PAGE: i64 = 256;

/// The hosts a window's free read found.
pub(crate) struct FreeHosts {
    pub ids: Vec<Uuid>,
    /// Fewer than asked came back: every usable host free over the window
    /// was read.
    pub complete: bool,
}

/// For each window, for each of `demands` (with the texts [`required`]
/// gives), up to `rows` usable hosts free over it for a lease of
/// `project`; in one round trip. Per window: the hosts, and whether every
/// demand's list came back short.
pub(crate) async fn free_hosts(
    c: &impl GenericClient,
    project: &str,
    demands: &[(&Demand, i64)],
    windows: &[Window],
    cleaning: Duration,
) -> Result<Vec<FreeHosts>, StoreError> {
    let secs = cleaning.num_milliseconds().max(0) as f64 / 1000.0;
    let required: Vec<Value> = demands.iter().map(|(d, _)| required(d)).collect();
    let ends: Vec<DateTime<Utc>> = windows.iter().map(|w| w.end.unwrap_or(DateTime::<Utc>::MAX_UTC)).collect();
    let params: Vec<[&(dyn ToSql + Sync); 6]> = windows
        .iter()
        .zip(&ends)
        .flat_map(|(w, end)| {
            let start = &w.start;
            let (secs, project) = (&secs, &project);
            required.iter().zip(demands).map(move |(texts, (_, rows))| {
                [start as &(dyn ToSql + Sync), end, secs as &(dyn ToSql + Sync), project, texts, rows]
            })
        })
        .collect();
    let mut statements: Vec<Statement<'_>> = vec![(super::near::CUSTOM, &[])];
    statements.extend(params.iter().map(|p| (FREE_HOSTS, &p[..])));
    statements.push((super::near::AS_BEFORE, &[]));
    let rows = sql::pipeline_all(c, &statements).await?;
    let lists = &rows[1..rows.len() - 1];
    Ok(lists
        .chunks(demands.len().max(1))
        .map(|per_demand| {
            let mut ids = BTreeSet::new();
            let mut complete = true;
            for (list, (_, asked)) in per_demand.iter().zip(demands) {
                complete &= (list.len() as i64) < *asked;
                ids.extend(list.iter().map(|r| r.get::<_, Uuid>("provider_uuid")));
            }
            FreeHosts { ids: ids.into_iter().collect(), complete }
        })
        .collect())
}

/// The instants, earliest first, at which holds on hosts a lease may use
/// end, each counted from when its host's cleaning after it is over (as
/// `Candidate::clean_after` makes it): the start times advice tries after
/// its first, the same instants a read of every candidate finds. Read a
/// page at a time, in the order the holds end; the hosts a page names
/// read once each, to ask berth-core whether the lease may use them and
/// how long they clean. An instant is given once every hold ending before
/// it has been read (the cleaning only moves an end later).
///
/// Holds ending before the range, whose host's cleaning carries past its
/// start, are counted when the host cleans no longer than the default; a
/// host whose own cleaning is longer may become free at an instant not
/// given.
pub(crate) struct Ends<'a> {
    project: &'a str,
    demands: Vec<&'a Demand>,
    /// The texts of each demand, as [`required`] gives them: a host holding
    /// one demand's may be one it can use.
    texts: Vec<Value>,
    cleaning: Duration,
    /// Per host named so far: its cleaning time, if the lease may use it.
    hosts: HashMap<Uuid, Option<Duration>>,
    /// The last end read, and its host: every end before it has been read.
    read_to: (DateTime<Utc>, Uuid),
    to: DateTime<Utc>,
    exhausted: bool,
    /// The last instant given: one found again is not given twice.
    given: DateTime<Utc>,
    /// Rows the next page reads.
    page: i64,
    found: BTreeSet<DateTime<Utc>>,
}

impl<'a> Ends<'a> {
    /// The instants in `(from, to]` for a lease of `project` asking `demands`.
    pub(crate) fn new(
        project: &'a str,
        demands: Vec<&'a Demand>,
        cleaning: Duration,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Ends<'a> {
        let texts = demands.iter().map(|d| required(d)).collect();
        let read_to = (from.checked_sub_signed(cleaning.max(Duration::zero())).unwrap_or(from), Uuid::max());
        let (hosts, found, exhausted, given) = (HashMap::new(), BTreeSet::new(), false, from);
        Ends { project, demands, texts, cleaning, hosts, read_to, to, exhausted, given, page: FIRST_PAGE, found }
    }

    /// Up to `n` next instants, earliest first; none when all are given.
    pub(crate) async fn next(&mut self, c: &impl GenericClient, n: usize) -> Result<Vec<DateTime<Utc>>, StoreError> {
        loop {
            // A hold not read yet ends no sooner than the last read, and
            // its host's cleaning only moves that later.
            let settled = match self.exhausted {
                true => self.found.len(),
                false => self.found.range(..=self.read_to.0).count(),
            };
            if settled >= n || self.exhausted {
                let out: Vec<DateTime<Utc>> = self.found.iter().take(n.min(settled)).copied().collect();
                for t in &out {
                    self.found.remove(t);
                }
                self.given = out.last().copied().unwrap_or(self.given);
                return Ok(out);
            }
            let page = self.page;
            self.page = page.saturating_mul(4).min(PAGE);
            let params: [&(dyn ToSql + Sync); 5] = [&self.read_to.0, &self.to, &self.texts, &page, &self.read_to.1];
            // Planned for its values to walk the index in order and stop
            // at the page's end, as the near read is (`near::CUSTOM`): a
            // plan made for no values read every hold in the range.
            let ends = (ENDS, &params[..]);
            let [_, rows, _] =
                sql::pipeline(c, [(super::near::CUSTOM, &[]), ends, (super::near::AS_BEFORE, &[])]).await?;
            self.exhausted = (rows.len() as i64) < page;
            let ends: Vec<(DateTime<Utc>, Uuid, bool)> =
                rows.iter().map(|r| (r.get("at"), r.get("host"), r.get("own"))).collect();
            self.read_to = ends.last().map(|e| (e.0, e.1)).unwrap_or(self.read_to);
            self.read_hosts(c, &ends).await?;
            for (at, h, _) in &ends {
                let Some(Some(cleaning)) = self.hosts.get(h) else {
                    continue;
                };
                let free = at.checked_add_signed(*cleaning).unwrap_or(*at);
                if free > self.given && free <= self.to {
                    self.found.insert(free);
                }
            }
        }
    }

    /// Reads the hosts of a page's `ends` that may give an instant not yet
    /// found: a host that names a cleaning time of its own may end its
    /// cleaning anywhere, but every other cleans for the default time, so
    /// once one of them that may take the lease ends at an instant, the
    /// rest that end then give nothing new. At 100,000 hosts with a
    /// million leases ending on the hour, an instant is some 114 ends:
    /// reading every host of a page cost advice most of its 30 ms. Hosts
    /// are read in rounds, for each instant not yet covered its next few
    /// hosts (1, then 4, 16, ... as hosts turn out unable to take it).
    async fn read_hosts(
        &mut self,
        c: &impl GenericClient,
        ends: &[(DateTime<Utc>, Uuid, bool)],
    ) -> Result<(), StoreError> {
        let mut per_instant = 1usize;
        loop {
            // Instants a host read already covers: one that may take the
            // lease and cleans for the default time ends then.
            let covered: BTreeSet<DateTime<Utc>> = ends
                .iter()
                .filter(|(_, h, own)| !own && matches!(self.hosts.get(h), Some(Some(_))))
                .map(|e| e.0)
                .collect();
            let (mut wanted, mut asked) = (BTreeSet::new(), HashMap::new());
            for (at, h, own) in ends.iter().filter(|e| !self.hosts.contains_key(&e.1)) {
                let n: &mut usize = asked.entry(*at).or_default();
                if *own || (!covered.contains(at) && *n < per_instant) {
                    *n += 1;
                    wanted.insert(*h);
                }
            }
            if wanted.is_empty() {
                return Ok(());
            }
            let wanted: Vec<Uuid> = wanted.into_iter().collect();
            let read = timelines::hosts(c, &wanted, false).await?;
            for id in wanted {
                let usable = read.get(&id).filter(|h| self.demands.iter().any(|d| host::eligible(h, d, self.project)));
                self.hosts.insert(id, usable.map(|h| host::cleaning_time(h, self.cleaning)));
            }
            per_instant = per_instant.saturating_mul(4);
        }
    }
}
