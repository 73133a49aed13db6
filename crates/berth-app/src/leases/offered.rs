//! Booking an offer: the lease its id carries (window, reservations with
//! their counts fixed, the lease's own id), for the caller it was made for,
//! before it expires, once.

use berth_core::dates::DateSpec;
use berth_core::error::{ErrorCode, ErrorKind};
use berth_store::commands::{Keyed, LeaseDates, NewLease, RequestKey};

use super::create::Created;
use super::parse::reservations;
use super::request::NewReservation;
use super::{instances, Leases};
use crate::offer_token as token;
use crate::{policy, Caller, Error};

/// An offer id the caller may not book, whatever the reason: garbled,
/// forged, or another's, alike, so that none tells which.
fn unknown() -> Error {
    berth_core::Error::not_found(ErrorCode::OfferNotFound, "no such offer could be found").into()
}

/// What the store refuses because the offer no longer fits (its capacity
/// or a quota taken since), as the offer's own refusal.
fn gone(e: berth_core::Error) -> berth_core::Error {
    match e.kind {
        ErrorKind::Capacity | ErrorKind::Quota => {
            berth_core::Error::conflict(ErrorCode::OfferGone, format!("the offer no longer fits: {}", e.detail))
        }
        _ => e,
    }
}

impl Leases<'_> {
    /// Books the offer `offer` as a lease named `name`; with `key`, a
    /// request sent again answers what the first made.
    pub(super) async fn book(
        &self,
        caller: &Caller<'_>,
        offer: &str,
        name: String,
        key: Option<RequestKey>,
    ) -> Result<Created, Error> {
        let store = &self.app.store;
        let sealed = token::open(&store.offer_key().await?, offer).ok_or_else(unknown)?;
        if sealed.project != caller.project_id || sealed.user != caller.user_id {
            return Err(unknown());
        }
        let now = store.now().await?;
        if now >= sealed.expires {
            let at = berth_core::dates::format_date(sealed.expires);
            return Err(
                berth_core::Error::conflict(ErrorCode::OfferExpired, format!("the offer expired at {at}")).into()
            );
        }
        let asked = sealed.reservations.into_iter().map(|b| NewReservation {
            resource_type: b.resource_type,
            params: b.params.as_object().cloned().unwrap_or_default(),
        });
        let reservations = reservations(&self.app.plugins, asked.collect()).await?;
        // An offer starting at once (its start passed while it was open)
        // starts when booked, and ends as offered.
        let start = if sealed.start <= now { DateSpec::Now } else { DateSpec::At(sealed.start) };
        let dates = LeaseDates::One { start, end: DateSpec::At(sealed.end), before_end: None };
        instances::check(self.app, caller, &reservations).await?;
        let (project_id, user_id) = (caller.project_id.to_string(), caller.user_id.to_string());
        let new = NewLease { name, project_id, user_id, dates, reservations };
        policy::check_create(&self.app.policy, &new, now).await?;
        let made = store.create_offered_lease(&caller.meta(None), new, sealed.id, key.as_ref()).await.map_err(gone)?;
        match made {
            Keyed::Made(leases) => Ok(Created::Made { leases, replayed: false }),
            Keyed::Earlier(leases) if leases.is_empty() => Err(berth_core::Error::not_found(
                ErrorCode::LeaseNotFound,
                "the lease made with this Idempotency-Key has since been deleted",
            )
            .into()),
            Keyed::Earlier(leases) => Ok(Created::Made { leases, replayed: true }),
        }
    }
}
