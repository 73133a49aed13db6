//! Lease creation as the cloud grows: the same one-host leases on 100 hosts
//! and on 100,000 should cost about the same, since a creation should read
//! and decide over what fits it, not over every host enrolled.
//!
//! For each host count: a fresh database, that many hosts enrolled through
//! the store (64 VCPU each, a `rack` capability, one host in 20 per rack),
//! `leases` leases booked beforehand at random 2-hour windows over the next
//! year (as the log would hold them, in batches), then one-host leases
//! created one at a time at random 2-hour windows over the year: first with
//! no property, then asking for one rack (one host in 20); then the other
//! lease operations (`scale_lease_ops`). Prints p50 and p99 of each, and
//! each p50 against the smallest cloud's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use berth_core::dates::DateSpec;
use berth_store::commands::{LeaseDates, NewHost, NewLease};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, DurationRound, Utc};
use rand::Rng;
use serde_json::Value;
use uuid::Uuid;

use crate::report::{ms, percentile, Report};
use crate::scale_lease_ops::P50s;
use crate::scale_leases::{meta, one_host, random_window, whole};

/// Creations timed per host count and kind of request (after a warm-up).
const MEASURED: usize = 200;
const WARMUP: usize = 20;
/// Racks: a rack holds one host in this many.
const RACKS: usize = 20;
/// Creations that read every candidate host (counted by the store).
const FULL_READS: &str = "berth_lease_placement_full_reads";
/// Reads of the hosts near the window, each depth counted (`berth-store`).
const NEAR_READS: &str = "berth_lease_placement_near_reads";
/// Reads through the hosts' free spans (`berth-store`).
const SPAN_READS: &str = "berth_lease_placement_span_reads";
/// Enrolments at once, each of up to [`ENROLMENT`] hosts.
pub(crate) const ENROLLING: usize = 2;
/// Hosts a bulk enrolment takes.
const ENROLMENT: usize = 1_000;

/// `n` hosts, enrolled in bulk ([`Store::enrol_hosts`]), one rack in
/// [`RACKS`] each (the placement scenarios enrol the same hosts).
pub(crate) async fn enrol(store: &Arc<Store>, n: usize) -> Result<Vec<Uuid>> {
    use futures::{StreamExt, TryStreamExt};
    let chunks = (0..n).step_by(ENROLMENT).map(|first| {
        let store = store.clone();
        async move {
            let hosts = (first..n.min(first + ENROLMENT))
                .map(|i| NewHost {
                    name: format!("scale-host-{i:06}"),
                    resources: Some((64, 262_144, 2_000)),
                    reservable: true,
                    capabilities: BTreeMap::from([("rack".to_string(), Value::from(format!("r{}", i % RACKS)))]),
                })
                .collect();
            store.enrol_hosts(&meta(), hosts).await
        }
    });
    let enrolled: Vec<Vec<Uuid>> = futures::stream::iter(chunks).buffered(ENROLLING).try_collect().await?;
    Ok(enrolled.concat())
}

/// Books `n` one-host leases at random windows on random hosts. Two may
/// overlap on a host: it only makes that host busier.
async fn book(store: &Store, hosts: &[Uuid], base: DateTime<Utc>, n: usize) -> Result<()> {
    let leases: Vec<_> = (0..n)
        .map(|_| {
            let (start, end) = random_window(base);
            (hosts[rand::thread_rng().gen_range(0..hosts.len())], start, end)
        })
        .collect();
    crate::setup::book(store, &meta(), &whole(), leases).await
}

/// Latencies of `count` creations at random windows, sorted, and the
/// leases made; refusals for capacity counted apart.
async fn creations(
    store: &Store,
    base: DateTime<Utc>,
    tag: &str,
    rack: Option<&str>,
    count: usize,
) -> Result<(Vec<Duration>, Vec<Uuid>, usize)> {
    let (mut out, mut made, mut refused) = (Vec::new(), Vec::new(), 0);
    for j in 0..count {
        let (start, end) = random_window(base);
        let new = NewLease {
            name: format!("{tag}-{j}"),
            project_id: "bench".into(),
            user_id: "bench".into(),
            dates: LeaseDates::One { start: DateSpec::At(start), end: DateSpec::At(end), before_end: None },
            reservations: vec![one_host(rack)?],
        };
        let t = Instant::now();
        match store.create_lease(&meta(), new).await {
            Ok(leases) => {
                out.push(t.elapsed());
                made.extend(leases.iter().map(|l| l.record.id));
            }
            Err(e) if e.kind == berth_core::error::ErrorKind::Capacity => refused += 1,
            Err(e) => return Err(e.into()),
        }
    }
    out.sort();
    Ok((out, made, refused))
}

/// p50 of each row on `hosts` hosts: creations with no property and with
/// one rack, then the other operations.
async fn one_size(report: &mut Report, hosts: usize, leases: usize, healed: usize) -> Result<P50s> {
    let db = TestDatabase::new().await;
    let store = Arc::new(db.store(ENROLLING + 2).with_drawn_ties(true));
    store.widen_wake_horizon(berth_manager::ManagerConfig::default().wake_horizon()).await?;
    let t = Instant::now();
    let ids = enrol(&store, hosts).await?;
    let base = (Utc::now() + chrono::Duration::days(1)).duration_trunc(chrono::Duration::hours(1))?;
    book(&store, &ids, base, leases).await?;
    db.analyze().await;
    let ready = t.elapsed();
    creations(&store, base, "warm", None, WARMUP).await?;
    let (mut p50s, mut made): (P50s, Vec<Uuid>) = (Vec::new(), Vec::new());
    crate::counts::install();
    for (what, tag, rack) in [
        ("lease creation, one host", "plain", None),
        ("lease creation, one host in a rack (1 in 20)", "rack", Some("r7")),
    ] {
        let full_before = crate::counts::get(FULL_READS).unwrap_or(0);
        let near_before = crate::counts::get(NEAR_READS).unwrap_or(0);
        let span_before = crate::counts::get(SPAN_READS).unwrap_or(0);
        let (l, ids, refused) = creations(&store, base, tag, rack, MEASURED).await?;
        made.extend(ids);
        let full = crate::counts::get(FULL_READS).map_or("not counted".into(), |n| (n - full_before).to_string());
        let near = crate::counts::get(NEAR_READS).map_or("not counted".into(), |n| (n - near_before).to_string());
        let span = crate::counts::get(SPAN_READS).map_or("not counted".into(), |n| (n - span_before).to_string());
        let line = format!(
            "{what}, {hosts} hosts, {leases} leases booked (ready in {:.1} s): p50 {}, p99 {}, \
             {refused} refused, {span} reads of free spans, {near} reads near the window, \
             {full} decided on every host",
            ready.as_secs_f64(),
            ms(percentile(&l, 50.0)),
            ms(percentile(&l, 99.0)),
        );
        report.line(line);
        p50s.push((what, percentile(&l, 50.0)));
    }
    p50s.extend(crate::scale_lease_ops::run(report, &store, &ids, base, &made, healed).await?);
    Ok(p50s)
}

/// Each host count in `sizes`, with `leases[i]` booked beforehand on the
/// `i`th (the last count for the sizes past it) and a host carrying
/// `healed` reservations healed; each p50 against the first size's.
pub async fn run(report: &mut Report, sizes: &[usize], leases: &[usize], healed: usize) -> Result<()> {
    let mut first: Option<(usize, P50s)> = None;
    for (i, &n) in sizes.iter().enumerate() {
        let booked = leases.get(i).or(leases.last()).copied().unwrap_or(0);
        let p50s = one_size(report, n, booked, healed).await?;
        let Some((n0, p0)) = &first else {
            first = Some((n, p50s));
            continue;
        };
        for ((what, p), (_, p_first)) in p50s.iter().zip(p0) {
            report.line(format!(
                "p50 at {n} hosts against {n0}, {what}: {:.2}x (target at most 2x at 10,000 hosts, 3x at 100,000)",
                p.as_secs_f64() / p_first.as_secs_f64().max(1e-9),
            ));
        }
    }
    Ok(())
}
