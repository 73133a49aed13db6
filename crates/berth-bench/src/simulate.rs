//! Placement quality: whether a lease read on the hosts near its window
//! packs the calendar as tightly as one read on every host. Best fit packs
//! leases so that long windows stay free; a cheaper read that chose worse
//! would show here as less of the calendar booked and more leases refused.
//!
//! One seed draws one stream of lease offers (mixed host counts and
//! lengths, at random hours over a fixed horizon); the same stream is
//! offered, in a fresh database each time, to a store that reads the hosts
//! near each window and to one that reads every host
//! (`Store::with_small_cloud`: never near, and always near, on this small cloud), until the calendar saturates (too
//! few of the last offers fit) or the offers run out. Printed: the share of
//! host-hours booked and the share of offers refused, for each read.

use std::collections::BTreeMap;

use anyhow::Result;
use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::EventMeta;
use berth_store::commands::{LeaseDates, NewHost, NewLease, NewReservation};
use berth_store::testing::TestDatabase;
use berth_store::Store;
use chrono::{DateTime, DurationRound, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::report::Report;

/// The seed of the offers; both reads get the same ones.
const SEED: u64 = 30;
const HOSTS: usize = 40;
/// Days of calendar the offers fall in.
const HORIZON_DAYS: i64 = 14;
/// Offers at most, and the saturation test: fewer than `SATURATED_FIT` of
/// the last `RECENT` offers fit.
const MOST_OFFERS: usize = 3_000;
const RECENT: usize = 200;
const SATURATED_FIT: usize = 20;
/// Host counts and lengths (hours) of the offers, each with its weight.
const SIZES: [(i64, u32); 4] = [(1, 50), (2, 25), (4, 15), (8, 10)];
const LENGTHS: [(i64, u32); 4] = [(2, 30), (8, 30), (24, 25), (72, 15)];
/// Leases the near read left to a read of every host (counted by the store).
const FULL_READS: &str = "berth_lease_placement_full_reads";

/// One offer: hosts, first hour after the horizon's start, hours.
#[derive(Debug, Clone, Copy)]
struct Offer {
    hosts: i64,
    start_h: i64,
    hours: i64,
}

fn weighted(rng: &mut StdRng, table: &[(i64, u32)]) -> i64 {
    let total: u32 = table.iter().map(|(_, w)| w).sum();
    let mut pick = rng.gen_range(0..total);
    for (v, w) in table {
        if pick < *w {
            return *v;
        }
        pick -= w;
    }
    unreachable!("the pick is below the total weight")
}

/// The offers `seed` draws, each within the horizon.
fn offers(seed: u64) -> Vec<Offer> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..MOST_OFFERS)
        .map(|_| {
            let hosts = weighted(&mut rng, &SIZES);
            let hours = weighted(&mut rng, &LENGTHS);
            let start_h = rng.gen_range(0..=HORIZON_DAYS * 24 - hours);
            Offer { hosts, start_h, hours }
        })
        .collect()
}

/// What one read reached: host-hours booked, offers made, offers refused,
/// which offers fit, whether the calendar saturated before the offers ran
/// out, and how many leases the near read left to a read of every host.
struct Outcome {
    booked_host_hours: i64,
    offered: usize,
    refused: usize,
    fitted: Vec<usize>,
    saturated: bool,
    full_reads: u64,
}

impl Outcome {
    fn utilisation(&self) -> f64 {
        self.booked_host_hours as f64 / (HOSTS as i64 * HORIZON_DAYS * 24) as f64
    }

    fn refused_share(&self) -> f64 {
        self.refused as f64 / self.offered.max(1) as f64
    }
}

fn meta() -> EventMeta {
    EventMeta { actor: Some("simulation".into()), ..Default::default() }
}

/// Offers `offers` in turn to a fresh store, full reads or not, until the
/// calendar saturates.
async fn offer_all(offers: &[Offer], full_reads: bool) -> Result<Outcome> {
    let db = TestDatabase::new().await;
    let store: Store = db.store(4).with_small_cloud(if full_reads { usize::MAX } else { 0 });
    for i in 0..HOSTS {
        let new = NewHost {
            name: format!("sim-host-{i:03}"),
            resources: Some((64, 262_144, 2_000)),
            reservable: true,
            capabilities: BTreeMap::new(),
        };
        store.enrol_host(&meta(), new).await?;
    }
    // A day ahead, on the hour: no lease starts while the offers are made.
    let base: DateTime<Utc> = (Utc::now() + chrono::Duration::days(1)).duration_trunc(chrono::Duration::hours(1))?;
    let mut out =
        Outcome { booked_host_hours: 0, offered: 0, refused: 0, fitted: Vec::new(), saturated: false, full_reads: 0 };
    let full_before = crate::counts::get(FULL_READS).unwrap_or(0);
    let mut recent: Vec<bool> = Vec::new();
    for (j, o) in offers.iter().enumerate() {
        let start = base + chrono::Duration::hours(o.start_h);
        let new = NewLease {
            name: format!("offer-{j}"),
            project_id: "simulation".into(),
            user_id: "simulation".into(),
            dates: LeaseDates::One {
                start: DateSpec::At(start),
                end: DateSpec::At(start + chrono::Duration::hours(o.hours)),
                before_end: None,
            },
            reservations: vec![NewReservation {
                resource_type: "physical:host".into(),
                params: json!({"min": o.hosts, "max": o.hosts}),
                demand: Demand::Hosts {
                    min: o.hosts as u32,
                    max: o.hosts as u32,
                    hypervisor_properties: None,
                    resource_properties: None,
                },
            }],
        };
        out.offered += 1;
        let fit = match store.create_lease(&meta(), new).await {
            Ok(_) => {
                out.booked_host_hours += o.hosts * o.hours;
                out.fitted.push(j);
                true
            }
            Err(e) if e.kind == berth_core::error::ErrorKind::Capacity => {
                out.refused += 1;
                false
            }
            Err(e) => return Err(e.into()),
        };
        recent.push(fit);
        if recent.len() >= RECENT && recent[recent.len() - RECENT..].iter().filter(|f| **f).count() < SATURATED_FIT {
            out.saturated = true;
            break;
        }
    }
    out.full_reads = crate::counts::get(FULL_READS).unwrap_or(0) - full_before;
    Ok(out)
}

pub async fn run(report: &mut Report) -> Result<()> {
    crate::counts::install();
    let offers = offers(SEED);
    let near = offer_all(&offers, false).await?;
    let full = offer_all(&offers, true).await?;
    for (what, o) in [("near read", &near), ("every host read", &full)] {
        let end = if o.saturated { "saturated" } else { "offers ran out" };
        report.line(format!(
            "placement simulation, seed {SEED}, {HOSTS} hosts over {HORIZON_DAYS} days, {what}: \
             {:.1} % of host-hours booked, {:.1} % of {} offers refused ({end})",
            100.0 * o.utilisation(),
            100.0 * o.refused_share(),
            o.offered,
        ));
    }
    let same = if near.fitted == full.fitted { "the same offers fit" } else { "different offers fit" };
    report.line(format!(
        "placement simulation: utilisation near read minus every host read {:+.1} points (target within 2); \
         {same}; the near read left {} of {} leases to a read of every host",
        100.0 * (near.utilisation() - full.utilisation()),
        near.full_reads,
        near.offered,
    ));
    Ok(())
}
