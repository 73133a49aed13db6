//! The instants at which hosts a lease may use become free, in order: the
//! start times availability advice (`queries::advice`) and offers try after
//! their first. An instant is the end of a hold (a bounded allocation of a
//! class the host has, or a maintenance window) plus its host's cleaning.
//!
//! Read instant by instant, not end by end: at 100,000 hosts with a
//! million leases ending on the hour, an instant is the end of some 114
//! leases, and every host but those naming a cleaning time of their own
//! cleans for the default time, so one of them that may take the lease is
//! all an instant needs. [`INSTANTS`] skips from one instant to the next
//! through the index of ends and reads the first host of each; [`ENDS`]
//! reads on within an instant where berth-core refuses the hosts read.
//!
//! As in `queries::near`, SQL only narrows: every filter is necessary for a
//! host to take a lease, never sufficient, and berth-core's rules decide on
//! the hosts read.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::host;
use berth_core::lease::Demand;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::near::required;
use super::timelines;
use crate::client::GenericClient;
use crate::sql::{self, Statement};
use crate::StoreError;

#[cfg(test)]
#[path = "ends_plan_tests.rs"]
mod plan_tests;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
#[path = "ends_tests.rs"]
mod tests;

/// A host `h` a demand of `$3` may use as far as SQL can tell: reservable,
/// enabled, holding one demand's texts. Every host an instant is read from
/// passes it.
macro_rules! may_use {
    () => {
        " h.reservable AND NOT h.disabled AND h.capabilities @> ANY($3) "
    };
}

/// A hold `a` of a class its host has: only those keep a lease off it.
macro_rules! of_its_class {
    () => {
        " EXISTS (SELECT 1 FROM inventories v
                  WHERE v.provider_uuid = a.provider_uuid AND v.resource_class = a.resource_class) "
    };
}

/// The next `$4` instants holds on any host end at, after `$1` and no later
/// than `$2`, each found by one probe of an index of holds' ends past the
/// last and one of `maintenance_windows_end` (V69); and per instant, the
/// hosts ending then that `may_use!` passes:
/// - kind 0: the first `$5` by uuid whose hold is of a class they have;
/// - kind 1: the first `$5` by uuid whose maintenance window ends then;
/// - kind 2: every one naming a cleaning time of its own. Where those hosts
///   are few (64 at most, through `hosts_own_cleaning`, V69) each is
///   probed; where more, every hold ending then is read.
///
/// An instant none of whose hosts may be used is given with no host.
pub(super) const INSTANTS: &str = concat!(
    "
    WITH RECURSIVE own AS MATERIALIZED (
        SELECT provider_uuid FROM hosts WHERE capabilities ? 'cleaning_time' LIMIT 65
    ), instants(at) AS (
        SELECT LEAST(
            (SELECT upper(a.during) FROM allocations a
             WHERE lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL
               AND upper(a.during) > $1 AND upper(a.during) <= $2
             ORDER BY upper(a.during) LIMIT 1),
            (SELECT upper(m.during) FROM maintenance_windows m
             WHERE upper(m.during) > $1 AND upper(m.during) <= $2
             ORDER BY upper(m.during) LIMIT 1))
        UNION ALL
        SELECT LEAST(
            (SELECT upper(a.during) FROM allocations a
             WHERE lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL
               AND upper(a.during) > i.at AND upper(a.during) <= $2
             ORDER BY upper(a.during) LIMIT 1),
            (SELECT upper(m.during) FROM maintenance_windows m
             WHERE upper(m.during) > i.at AND upper(m.during) <= $2
             ORDER BY upper(m.during) LIMIT 1))
        FROM instants i WHERE i.at IS NOT NULL
    )
    SELECT i.at, e.host, e.kind
    FROM (SELECT at FROM instants WHERE at IS NOT NULL LIMIT $4) i
    LEFT JOIN LATERAL (
        (SELECT DISTINCT a.provider_uuid AS host, 0 AS kind
         FROM allocations a JOIN hosts h ON h.provider_uuid = a.provider_uuid
         WHERE lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL AND upper(a.during) = i.at
           AND ",
    may_use!(),
    "
           AND ",
    of_its_class!(),
    "
         ORDER BY 1 LIMIT $5)
        UNION ALL
        (SELECT DISTINCT m.provider_uuid, 1
         FROM maintenance_windows m JOIN hosts h ON h.provider_uuid = m.provider_uuid
         WHERE upper(m.during) = i.at
           AND ",
    may_use!(),
    "
         ORDER BY 1 LIMIT $5)
        UNION ALL
        SELECT o.provider_uuid, 2
        FROM own o JOIN hosts h ON h.provider_uuid = o.provider_uuid
        WHERE (SELECT count(*) FROM own) <= 64
          AND ",
    may_use!(),
    "
          AND (EXISTS (SELECT 1 FROM allocations a
                       WHERE a.provider_uuid = o.provider_uuid AND upper(a.during) = i.at
                         AND lower(a.during) IS NOT NULL AND",
    of_its_class!(),
    ")
               OR EXISTS (SELECT 1 FROM maintenance_windows m
                          WHERE m.provider_uuid = o.provider_uuid AND upper(m.during) = i.at))
        UNION ALL
        (SELECT DISTINCT a.provider_uuid, 2
         FROM allocations a JOIN hosts h ON h.provider_uuid = a.provider_uuid
         WHERE (SELECT count(*) FROM own) > 64
           AND lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL AND upper(a.during) = i.at
           AND h.capabilities ? 'cleaning_time'
           AND ",
    may_use!(),
    "
           AND ",
    of_its_class!(),
    ")
        UNION ALL
        (SELECT DISTINCT m.provider_uuid, 2
         FROM maintenance_windows m JOIN hosts h ON h.provider_uuid = m.provider_uuid
         WHERE (SELECT count(*) FROM own) > 64 AND upper(m.during) = i.at
           AND h.capabilities ? 'cleaning_time'
           AND ",
    may_use!(),
    ")
    ) e ON true
    ORDER BY i.at, e.kind, e.host"
);

/// The next `$4` ends of holds on hosts as [`INSTANTS`] reads them (kinds 0
/// and 1 together), in the order of end then host, after the pair (`$1`,
/// `$5`) and no later than `$2`; each pair once. With `$1` and `$2` the
/// same instant, the hosts ending then after `$5`. A page is a walk of
/// `allocations_bounded_end_host` (V67) in its order.
pub(super) const ENDS: &str = concat!(
    "
    SELECT DISTINCT at, host FROM (
        (SELECT DISTINCT upper(a.during) AS at, a.provider_uuid AS host
         FROM allocations a JOIN hosts h ON h.provider_uuid = a.provider_uuid
         WHERE lower(a.during) IS NOT NULL AND upper(a.during) IS NOT NULL
           AND upper(a.during) >= $1 AND upper(a.during) <= $2
           AND (upper(a.during), a.provider_uuid) > ($1, $5)
           AND ",
    may_use!(),
    "
           AND ",
    of_its_class!(),
    "
         ORDER BY 1, 2 LIMIT $4)
        UNION ALL
        (SELECT DISTINCT upper(m.during), m.provider_uuid
         FROM maintenance_windows m JOIN hosts h ON h.provider_uuid = m.provider_uuid
         WHERE upper(m.during) >= $1 AND upper(m.during) <= $2
           AND (upper(m.during), m.provider_uuid) > ($1, $5)
           AND ",
    may_use!(),
    "
         ORDER BY 1, 2 LIMIT $4)
    ) e ORDER BY at, host LIMIT $4"
);

/// Instants a page of [`INSTANTS`] reads: the first page, then four times
/// as many each time up to [`PAGE`]. Advice asks a few start times at once,
/// and a cleaning time moves an instant past the ends read with it.
const FIRST_PAGE: i64 = 8;
const PAGE: i64 = 128;

/// Hosts of each kind read at an instant at first, then four times as many
/// each round up to [`HOSTS`], while none read may take the lease.
const FIRST_HOSTS: i64 = 1;
const HOSTS: i64 = 256;

/// The hosts read at an instant, with their kind (as [`INSTANTS`] gives
/// it; those [`ENDS`] reads count as kind 0).
type AtInstant = Vec<(Uuid, i32)>;

/// The instants, earliest first, at which hosts a lease may use become
/// free, each counted from when its host's cleaning after a hold is over
/// (as `Candidate::clean_after` makes it): the same instants a read of
/// every candidate finds. Read a page of instants at a time, in the order
/// the holds end; an instant is given once every hold ending before it has
/// been read (the cleaning only moves an end later).
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
    /// Per host read so far: its cleaning time, if the lease may use it.
    hosts: HashMap<Uuid, Option<Duration>>,
    /// The last instant read: every hold ending by then has been read.
    read_to: DateTime<Utc>,
    to: DateTime<Utc>,
    exhausted: bool,
    /// The last instant given: one found again is not given twice.
    given: DateTime<Utc>,
    /// Instants the next page reads.
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
        let read_to = from.checked_sub_signed(cleaning.max(Duration::zero())).unwrap_or(from);
        let (hosts, found, exhausted, given) = (HashMap::new(), BTreeSet::new(), false, from);
        Ends { project, demands, texts, cleaning, hosts, read_to, to, exhausted, given, page: FIRST_PAGE, found }
    }

    /// Up to `n` next instants, earliest first; none when all are given.
    pub(crate) async fn next(&mut self, c: &impl GenericClient, n: usize) -> Result<Vec<DateTime<Utc>>, StoreError> {
        loop {
            // A hold not read yet ends after the last instant read, and its
            // host's cleaning only moves that later.
            let settled = match self.exhausted {
                true => self.found.len(),
                false => self.found.range(..=self.read_to).count(),
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
            let params: [&(dyn ToSql + Sync); 5] = [&self.read_to, &self.to, &self.texts, &page, &FIRST_HOSTS];
            // Planned for its values, as the near read is (`near::CUSTOM`),
            // so that each skip is a probe of the index in its order.
            let instants = (INSTANTS, &params[..]);
            let [_, rows, _] =
                sql::pipeline(c, [(super::near::CUSTOM, &[]), instants, (super::near::AS_BEFORE, &[])]).await?;
            let mut instants: BTreeMap<DateTime<Utc>, AtInstant> = BTreeMap::new();
            for r in &rows {
                let at = instants.entry(r.get("at")).or_default();
                if let (Some(h), Some(kind)) = (r.get("host"), r.get("kind")) {
                    at.push((h, kind));
                }
            }
            self.exhausted = (instants.len() as i64) < page;
            self.read_to = instants.keys().next_back().copied().unwrap_or(self.to);
            self.read_hosts(c, instants.values().flatten().map(|e| e.0)).await?;
            self.read_on(c, &mut instants).await?;
            for (at, read) in &instants {
                for (h, _) in read {
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
    }

    /// Reads on within each instant none of whose hosts read may take the
    /// lease and clean for the default time, where more hosts end then than
    /// were read: in rounds, each reading four times as many past the last.
    async fn read_on(
        &mut self,
        c: &impl GenericClient,
        instants: &mut BTreeMap<DateTime<Utc>, AtInstant>,
    ) -> Result<(), StoreError> {
        let mut n = FIRST_HOSTS;
        let mut open: Vec<(DateTime<Utc>, Uuid)> =
            instants.iter().filter_map(|(at, read)| self.read_past(read, n).map(|h| (*at, h))).collect();
        while !open.is_empty() {
            n = n.saturating_mul(4).min(HOSTS);
            let params: Vec<[&(dyn ToSql + Sync); 5]> =
                open.iter().map(|(at, after)| [at as &(dyn ToSql + Sync), at, &self.texts, &n, after]).collect();
            let mut statements: Vec<Statement<'_>> = vec![(super::near::CUSTOM, &[])];
            statements.extend(params.iter().map(|p| (ENDS, &p[..])));
            statements.push((super::near::AS_BEFORE, &[]));
            let lists = sql::pipeline_all(c, &statements).await?;
            let lists = &lists[1..lists.len() - 1];
            self.read_hosts(c, lists.iter().flatten().map(|r| r.get::<_, Uuid>("host"))).await?;
            let mut next = Vec::new();
            for ((at, _), list) in open.iter().zip(lists) {
                let more: AtInstant = list.iter().map(|r| (r.get("host"), 0)).collect();
                let last = more.last().map(|e| e.0);
                let full = (list.len() as i64) == n;
                let covered = self.covers(&more);
                instants.entry(*at).or_default().extend(more);
                if let (Some(last), true, false) = (last, full, covered) {
                    next.push((*at, last));
                }
            }
            open = next;
        }
        Ok(())
    }

    /// Whether a host read at an instant may take the lease and cleans for
    /// the default time: the other hosts ending then that clean so give
    /// the same instant.
    fn covers(&self, read: &AtInstant) -> bool {
        read.iter().any(|(h, kind)| *kind < 2 && self.hosts.get(h) == Some(&Some(self.cleaning)))
    }

    /// The host past which to read on at an instant, if none read covers it
    /// and a kind read `n` hosts (so may have more): the earlier kind's last.
    fn read_past(&self, read: &AtInstant, n: i64) -> Option<Uuid> {
        if self.covers(read) {
            return None;
        }
        (0..2)
            .filter_map(|kind| {
                let of_kind: Vec<Uuid> = read.iter().filter(|e| e.1 == kind).map(|e| e.0).collect();
                ((of_kind.len() as i64) >= n).then(|| of_kind.last().copied()).flatten()
            })
            .min()
    }

    /// Reads the hosts of `ids` not read yet: whether the lease may use
    /// each, and how long it cleans.
    async fn read_hosts(&mut self, c: &impl GenericClient, ids: impl Iterator<Item = Uuid>) -> Result<(), StoreError> {
        let wanted: BTreeSet<Uuid> = ids.filter(|h| !self.hosts.contains_key(h)).collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let wanted: Vec<Uuid> = wanted.into_iter().collect();
        let read = timelines::hosts(c, &wanted, false).await?;
        for id in wanted {
            let usable = read.get(&id).filter(|h| self.demands.iter().any(|d| host::eligible(h, d, self.project)));
            self.hosts.insert(id, usable.map(|h| host::cleaning_time(h, self.cleaning)));
        }
        Ok(())
    }
}
