//! The lease operations other than a one-host creation, as the cloud grows
//! (`scale`): availability advice for one host for 2 hours (the earliest
//! five windows in the next 30 days, as `POST /v1/availability` asks by
//! default), extension advice (a year past the lease's end, as
//! `GET /v1/leases/{id}/extension` asks by default), a recurring lease of
//! 50 weekly occurrences, and healing a host that carries `healed`
//! reservations (disabling it, as `PUT /v1/os-hosts/{id}` with the
//! reservations' demands does). Each is timed on the cloud the creations
//! were timed on, so its p50 can be set against the smallest cloud's.

use std::time::{Duration, Instant};

use anyhow::Result;
use berth_core::lease::Demand;
use berth_store::commands::{Demands, LeaseDates, NewLease};
use berth_store::Store;
use chrono::{DateTime, Utc};
use rand::Rng;
use uuid::Uuid;

use crate::report::{ms, percentile, Report};

/// Advice asked per host count, and recurring leases created.
const ADVICE: usize = 40;
const RECURRING: usize = 10;
/// Occurrences of a recurring lease, a week apart.
const OCCURRENCES: i64 = 50;

/// p50 of each row, by name, in the order printed.
pub type P50s = Vec<(&'static str, Duration)>;

/// Times each row on `store`, whose `hosts` carry what `scale` booked
/// from `base`; `leases`: leases made by creation, for extension advice.
pub async fn run(
    report: &mut Report,
    store: &Store,
    hosts: &[Uuid],
    base: DateTime<Utc>,
    leases: &[Uuid],
    healed: usize,
) -> Result<P50s> {
    let n = hosts.len();
    let mut p50s = Vec::new();
    let mut row = |what: &'static str, mut l: Vec<Duration>, note: String| {
        l.sort();
        report.line(format!(
            "{what}, {n} hosts: p50 {}, p99 {} ({} timed{note})",
            ms(percentile(&l, 50.0)),
            ms(percentile(&l, 99.0)),
            l.len()
        ));
        p50s.push((what, percentile(&l, 50.0)));
    };
    let (l, found) = availability(store, base).await?;
    row("availability advice, one host for 2 h", l, format!(", {found} windows found"));
    row("extension advice", extension(store, leases).await?, String::new());
    let (l, refused) = recurring(store, base).await?;
    row("recurring lease of 50 occurrences", l, format!(", {refused} refused"));
    let (l, moved) = heal(store, hosts[0], base, healed).await?;
    row("healing a host carrying its reservations", l, format!(", {moved} slots moved, {healed} booked on it"));
    Ok(p50s)
}

/// `ADVICE` asks from random points in the year, and windows found.
async fn availability(store: &Store, base: DateTime<Utc>) -> Result<(Vec<Duration>, usize)> {
    let one = [crate::scale_leases::one_host(None)?];
    let (mut out, mut found) = (Vec::new(), 0);
    for _ in 0..ADVICE {
        let from = crate::scale_leases::random_window(base).0;
        let t = Instant::now();
        let got = store
            .availability("bench", &one, chrono::Duration::hours(2), from, from + chrono::Duration::days(30), 5)
            .await?;
        out.push(t.elapsed());
        found += got.len();
    }
    Ok((out, found))
}

/// Extension advice on up to `ADVICE` of `leases`.
async fn extension(store: &Store, leases: &[Uuid]) -> Result<Vec<Duration>> {
    let mut out = Vec::new();
    for id in leases.iter().take(ADVICE) {
        let lease = store.lease(*id, None).await?;
        let t = Instant::now();
        store.extension(*id, None, lease.record.end + chrono::Duration::days(365)).await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// `RECURRING` one-host leases of `OCCURRENCES` weekly 2-hour windows, each
/// from a random hour of the first week; refusals for capacity counted apart.
async fn recurring(store: &Store, base: DateTime<Utc>) -> Result<(Vec<Duration>, usize)> {
    let (mut out, mut refused) = (Vec::new(), 0);
    for j in 0..RECURRING {
        let first = base + chrono::Duration::hours(rand::thread_rng().gen_range(0..24 * 7));
        let windows = (0..OCCURRENCES)
            .map(|k| {
                let start = first + chrono::Duration::weeks(k);
                (start, start + chrono::Duration::hours(2))
            })
            .collect();
        let new = NewLease {
            name: format!("weekly-{j}"),
            project_id: "bench".into(),
            user_id: "bench".into(),
            dates: LeaseDates::Recurring { occurrences: windows, time_zone: None },
            reservations: vec![crate::scale_leases::one_host(None)?],
        };
        let t = Instant::now();
        match store.create_lease(&crate::scale_leases::meta(), new).await {
            Ok(_) => out.push(t.elapsed()),
            Err(e) if e.kind == berth_core::error::ErrorKind::Capacity => refused += 1,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((out, refused))
}

/// Books `count` leases on `host`, 8 hours apart from `base` (a year holds
/// 1,095), then disables it as the API does: the reservations to heal
/// listed, their demands given, the host disabled and every one moved in
/// the same transaction. One heal, timed; and the slots moved.
async fn heal(store: &Store, host: Uuid, base: DateTime<Utc>, count: usize) -> Result<(Vec<Duration>, usize)> {
    let leases = (0..count).map(|k| {
        let start = base + chrono::Duration::hours(8 * i64::try_from(k).unwrap_or(i64::MAX));
        (host, start, start + chrono::Duration::hours(2))
    });
    crate::setup::book(store, &crate::scale_leases::meta(), &crate::scale_leases::whole(), leases.collect::<Vec<_>>())
        .await?;
    let t = Instant::now();
    let one = Demand::Hosts { min: 1, max: 1, hypervisor_properties: None, resource_properties: None };
    let demands: Demands =
        store.reservations_to_heal(&[host]).await?.iter().map(|r| (r.reservation, one.clone())).collect();
    let healed =
        store.set_host_disabled(&crate::scale_leases::meta(), host, true, Some("bench".into()), &demands).await?;
    let took = t.elapsed();
    Ok((vec![took], healed.iter().map(|h| h.moved).sum()))
}
