//! Offers (`POST /v1/offers`): windows in which a lease would fit, found
//! by the store (`Store::offers`), ranked, each sealed into an id that
//! books exactly it (`POST /v1/leases` with `offer`: `leases::offered`).
//! Nothing is held while an offer is open: it is a promise to try.

mod counts;

use berth_core::error::ErrorCode;
use berth_core::lease::Demand;
use berth_core::offer::{self, Found, Order};
use berth_core::time::DateMath;
use berth_store::commands::NewReservation;
use berth_store::offers::OfferAsk;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::advice::date;
use crate::offer_token::{self as token, Booked, Payload};
use crate::{Allowed, App, Caller, Error, Rule};

/// How far ahead offers start when not told.
const DEFAULT_SEARCH: Duration = Duration::days(30);
/// The widest range of start times, and the longest duration, asked.
const MAX_RANGE: Duration = Duration::days(366);
/// How many offers are answered when not told, and at most.
const DEFAULT_LIMIT: usize = 6;
const MAX_LIMIT: u64 = 100;

/// The offer use cases, over one [`App`].
pub struct Offers<'a> {
    app: &'a App,
}

/// A request for offers: the reservations as asked (a host count range is
/// the range offered; an instance `amount` may be a range `{"min", "max"}`), a range of durations, a range of start times
/// (default now, and 30 days after `from`), how many (default 6, at most
/// 100), the ranking (default earliest), and how long each offer may be
/// booked.
pub struct OfferRequest {
    pub reservations: Vec<crate::leases::NewReservation>,
    pub shortest: Duration,
    pub longest: Duration,
    pub from: Option<String>,
    pub until: Option<String>,
    pub limit: Option<u64>,
    pub order: Option<String>,
    pub ttl: Duration,
}

/// One offer: its id (which books it), window, reservations as they would
/// be booked, and until when it may be booked.
pub struct Offer {
    pub id: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reservations: Vec<Booked>,
    pub expires: DateTime<Utc>,
}

/// The offers, ranked, and what was asked.
pub struct OfferList {
    pub offers: Vec<Offer>,
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub order: Order,
}

fn invalid(m: impl Into<String>) -> Error {
    berth_core::Error::invalid(ErrorCode::OfferInvalid, m).into()
}

/// `r` as it would be booked with `count`: a host range, or an amount,
/// fixed at it.
fn booked(r: &NewReservation, count: u32) -> Booked {
    let mut params = r.params.clone();
    if let Value::Object(p) = &mut params {
        match &r.demand {
            Demand::Hosts { .. } => {
                p.insert("min".into(), count.into());
                p.insert("max".into(), count.into());
            }
            Demand::Slots { .. } => {
                p.insert("amount".into(), count.into());
            }
            Demand::Nothing => {}
        }
    }
    Booked { resource_type: r.resource_type.clone(), params }
}

impl Offers<'_> {
    /// The offers for the caller's project and user, ranked and cut.
    pub async fn offer(&self, caller: &Caller<'_>, a: Allowed, asked: OfferRequest) -> Result<OfferList, Error> {
        debug_assert_eq!(a.0, Rule::Availability);
        let store = &self.app.store;
        let now = store.now().await?;
        let from = date(asked.from.as_deref(), "from", now, now)?.max(now);
        let until = date(asked.until.as_deref(), "until", from.saturating_plus(DEFAULT_SEARCH), now)?;
        if until < from {
            return Err(invalid("until (the latest start) is before from"));
        }
        if until.signed_duration_since(from) > MAX_RANGE || asked.longest > MAX_RANGE {
            return Err(invalid("the range of start times and the longest duration are at most 366 days each"));
        }
        if asked.shortest > asked.longest {
            return Err(invalid("duration: min is longer than max"));
        }
        let limit = match asked.limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=MAX_LIMIT).contains(&n) => n as usize,
            Some(_) => return Err(invalid("limit must be 1 to 100")),
        };
        let order = asked.order.as_deref().map(Order::parse).transpose()?.unwrap_or_default();
        let (wanted, counts) = counts::ranges(self.app, asked.reservations).await?;
        let demands: Vec<Demand> = wanted.iter().map(|r| r.demand.clone()).collect();
        let (project, user) = (caller.project_id, caller.user_id);
        let ask = OfferAsk {
            project,
            user,
            demands: &demands,
            counts: &counts,
            shortest: asked.shortest,
            longest: asked.longest,
            from,
            until,
            now,
            // One offer per start, tried earliest first: the first found are the earliest.
            earliest: (order == Order::Earliest).then_some(limit),
        };
        let found = offer::rank(store.offers(&ask).await?, order, limit);
        let key = store.offer_key().await?;
        let expires = now.saturating_plus(asked.ttl);
        let offers: Result<Vec<Offer>, Error> =
            found.into_iter().map(|f| seal(&key, caller, &wanted, f, expires)).collect();
        Ok(OfferList { offers: offers?, from, until, order })
    }
}

/// The offer `f` for the caller, sealed under `key`: it expires at
/// `expires`, or at its end if sooner (past its end it fits nowhere).
fn seal(
    key: &[u8],
    caller: &Caller<'_>,
    wanted: &[NewReservation],
    f: Found,
    expires: DateTime<Utc>,
) -> Result<Offer, Error> {
    let reservations: Vec<Booked> = wanted.iter().zip(&f.counts).map(|(r, n)| booked(r, *n)).collect();
    let expires = expires.min(f.end);
    let payload = Payload::new(caller.project_id, caller.user_id, f.start, f.end, reservations.clone(), expires);
    let id = token::seal(key, &payload).ok_or_else(|| invalid("the reservations are too large to offer"))?;
    Ok(Offer { id, start: f.start, end: f.end, reservations, expires })
}

impl App {
    /// The offer use cases.
    pub fn offers(&self) -> Offers<'_> {
        Offers { app: self }
    }
}
