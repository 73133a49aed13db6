//! Which hosts are free over a window, found through indexes rather than by
//! reading every host: the usable hosts free then, a bounded few of them
//! (`FREE_HOSTS`). Availability advice (`queries::advice`) tries a lease at
//! `from` and at the instants holds end (`queries::ends`), each on the few
//! hosts free then, so its cost follows the windows it tries, not the size
//! of the cloud.
//!
//! As in `queries::near`, SQL only narrows: every filter is necessary for a
//! host to take a lease, never sufficient, and berth-core's rules decide on
//! the hosts read.

use std::collections::BTreeSet;

use berth_core::lease::Demand;
use berth_core::Window;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::near::{around, free, required, usable};
use crate::client::GenericClient;
use crate::sql::{self, Statement};
use crate::StoreError;

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
