//! Offers: at each start time availability advice tries, the longest
//! window in a range of durations in which every reservation fits at its
//! least count, and then the most of each count that fits in it; each
//! decided as lease creation decides (`fit::decide`: capacity, cleaning
//! time, host rules at every instant) and within the quotas of the
//! project and user asking. Reads only; locks nothing: an offer is a
//! promise to try, which its booking decides again under its locks.
//!
//! Beside `queries` rather than in it: it reads the quotas as commands do
//! (`quota::allowance`), and the quotas reach the locks, which read
//! through `queries`.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::lease::Demand;
use berth_core::offer::{self, Found};
use berth_core::time::DateMath;
use berth_core::{Error, Window};
use chrono::{DateTime, Duration, Utc};

use crate::queries::ends;
use crate::queries::fit::{candidate_ids, decide, gather, Gathered, Item, Plan};
use crate::quota::{self, Allowance};
use crate::Store;

/// Most start times an offer request tries (the earliest): each costs a
/// few dozen decisions in memory (a search over durations, then counts).
pub const MAX_STARTS: usize = 256;

/// A request for offers.
pub struct OfferAsk<'a> {
    pub project: &'a str,
    pub user: &'a str,
    /// Each reservation's demand as asked.
    pub demands: &'a [Demand],
    /// Each reservation's range of counts: hosts, or instances (a
    /// demand's own count outside it is ignored).
    pub counts: &'a [(u32, u32)],
    /// The range of durations.
    pub shortest: Duration,
    pub longest: Duration,
    /// The range of start times (`until` the latest).
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
    /// The database's time: quotas count usage from then on.
    pub now: DateTime<Utc>,
    /// Stop once this many are found: the earliest are all that is wanted.
    pub earliest: Option<usize>,
}

/// What decides one offer: the candidates read once over every window
/// tried, and the quotas bearing on the caller.
struct Decider<'a> {
    ask: &'a OfferAsk<'a>,
    gathered: Gathered,
    limited: Option<quota::Limited>,
}

impl Decider<'_> {
    /// Whether the demands at `counts` fit together over `window`, beside
    /// what others hold and within the caller's quotas.
    fn fits(&self, window: Window, counts: &[u32]) -> bool {
        let demands: Vec<Demand> = self.ask.demands.iter().zip(counts).map(|(d, n)| d.exactly(*n)).collect();
        let items: Vec<Item> = demands.iter().map(|d| Item::Place(d, Vec::new())).collect();
        match decide(&mut self.gathered.clone(), self.ask.project, &items, &[window]) {
            Ok(plan) => self.within_quota(&plan, window),
            Err(_) => false,
        }
    }

    fn within_quota(&self, plan: &Plan, window: Window) -> bool {
        let Some(limited) = &self.limited else {
            return true;
        };
        let mut holds: BTreeMap<(String, String, String), quota::Holds> = BTreeMap::new();
        for placed in plan.iter().flatten().flatten() {
            for (class, used) in &placed.resources {
                let key = (self.ask.project.to_string(), self.ask.user.to_string(), class.clone());
                holds.entry(key).or_default().push((window, *used));
            }
        }
        limited.check(&holds, &[], &[]).is_ok()
    }

    /// The offer at `start`, if the least counts fit for the shortest
    /// duration: the longest duration they fit for, then the most of each
    /// count (in the order of the reservations) at that duration.
    fn offer_at(&self, start: DateTime<Utc>) -> Result<Option<Found>, Error> {
        let window = |d: Duration| -> Result<Window, Error> { Ok(Window { start, end: Some(start.plus("end", d)?) }) };
        let mut counts: Vec<u32> = self.ask.counts.iter().map(|c| c.0).collect();
        if !self.fits(window(self.ask.shortest)?, &counts) {
            return Ok(None);
        }
        // The end is at most `until + longest`, checked before the search.
        let fits_for = |d: Duration| window(d).is_ok_and(|w| self.fits(w, &counts));
        let duration = offer::longest(self.ask.shortest, self.ask.longest, fits_for);
        let w = window(duration)?;
        for i in 0..counts.len() {
            let (lo, hi) = (counts[i], self.ask.counts[i].1);
            let mut trial = counts.clone();
            counts[i] = offer::most(lo, hi, |n| {
                trial[i] = n;
                self.fits(w, &trial)
            });
        }
        Ok(Some(Found { start, end: w.end.unwrap_or(start), counts }))
    }
}

impl Store {
    /// One offer per start time tried where one fits (at most
    /// [`MAX_STARTS`] start times: `from` and each instant a hold on a host
    /// the reservations may use ends, as availability advice tries them),
    /// in the order of their start; unranked. None at all when one more
    /// lease is past the caller's `leases` quota. Reads only.
    pub async fn offers(&self, ask: &OfferAsk<'_>) -> Result<Vec<Found>, Error> {
        debug_assert_eq!(ask.demands.len(), ask.counts.len(), "a range of counts per reservation");
        let last_end = ask.until.plus("until", ask.longest)?;
        let cleaning = self.cleaning_time();
        crate::tx::command!(self, |tx| {
            let least_demands: Vec<Demand> = ask.demands.iter().zip(ask.counts).map(|(d, c)| d.exactly(c.0)).collect();
            let items: Vec<Item> = least_demands.iter().map(|d| Item::Place(d, Vec::new())).collect();
            let span = Window { start: ask.from, end: Some(last_end) };
            let ids = candidate_ids(tx, ask.project, &items).await?;
            let gathered = gather(tx, &ids, span, span, &[], cleaning).await?;
            let classes: BTreeSet<String> =
                gathered.candidates.iter().flat_map(|c| c.inventories.keys().cloned()).collect();
            let classes: Vec<String> = classes.into_iter().collect();
            let limited = match quota::allowance(tx, ask.project, ask.user, &classes, span, ask.now).await? {
                Allowance::Unlimited => None,
                Allowance::Limited(l) => Some(l),
                Allowance::NoLease => return Ok(Vec::new()),
            };
            let placing: Vec<&Demand> =
                ask.demands.iter().filter(|d| matches!(d, Demand::Hosts { .. } | Demand::Slots { .. })).collect();
            let mut starts = vec![ask.from];
            let mut ends = ends::Ends::new(ask.project, placing, cleaning, ask.from, ask.until);
            starts.extend(ends.next(tx, MAX_STARTS - 1).await?);
            let decider = Decider { ask, gathered, limited };
            let mut out = Vec::new();
            for start in starts {
                if ask.earliest.is_some_and(|n| out.len() >= n) {
                    break;
                }
                out.extend(decider.offer_at(start)?);
            }
            Ok(out)
        })
    }
}

/// The key that signs offers: one per database, made by its migration.
const OFFER_KEY: &str = "SELECT key FROM offer_key WHERE id = 1";

impl Store {
    /// The key offers are signed with, shared by every berthd of the
    /// database (never in the log nor a projection).
    pub async fn offer_key(&self) -> Result<Vec<u8>, Error> {
        let c = self.client().await?;
        let rows = crate::sql::query(&c, OFFER_KEY, &[]).await.map_err(crate::StoreError::from)?;
        let key: Vec<u8> = rows.first().map(|r| r.get("key")).unwrap_or_default();
        if key.len() < 16 {
            return Err(Error::internal("the offer key is missing (is the database migrated?)"));
        }
        Ok(key)
    }
}
