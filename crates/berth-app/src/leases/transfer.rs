//! Splitting a lease and handing it to another project, with consent: a
//! member of the lease's project offers it, a member of the target project
//! accepts; only who passes `berth:leases:transfer_without_consent` (an
//! admin, by default) moves it at once. A member's split towards another
//! project makes the new lease in the lease's own project, offered to the
//! target. Only a lease not yet started is split or moved (the store says).

use berth_core::error::{ErrorCode, ErrorKind};
use berth_core::lease::split::SplitPart;
use berth_store::commands::{Handover, SplitAsk};
use uuid::Uuid;

use super::{find, owner, Lease, Leases};
use crate::{Caller, Error, Rule};

/// Longest project or user id a transfer names.
const MAX_ID: usize = 255;

/// `POST /v1/leases/{id}/split`, read.
#[derive(Debug, Clone)]
pub struct SplitRequest {
    pub name: String,
    pub parts: Vec<SplitPart>,
    /// The new lease's project (None: the lease's own).
    pub project_id: Option<String>,
}

/// How a caller asks a transfer to be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Now, without the target's acceptance (admin).
    Immediate,
    /// As an offer the target project accepts.
    Offer,
}

/// `POST /v1/leases/{id}/transfer`, read.
#[derive(Debug, Clone)]
pub struct TransferRequest {
    pub project_id: String,
    /// The lease's user once moved (None: its own); only at once.
    pub user_id: Option<String>,
    /// None: at once for those who may, else an offer.
    pub consent: Option<Consent>,
}

/// What a transfer did.
#[derive(Debug)]
pub enum Transferred {
    /// The lease moved; as it is now.
    Moved(Lease),
    /// The lease is offered; as it is now (its `transfer` says to whom).
    Offered(Lease),
}

fn no_consent(detail: impl Into<String>) -> Error {
    Error::Domain(berth_core::Error::new(ErrorKind::Forbidden, ErrorCode::TransferNoConsent, detail))
}

/// A project or user id a request names: not empty, bounded.
fn check_id(what: &str, id: &str) -> Result<(), Error> {
    if id.is_empty() || id.len() > MAX_ID || id.chars().any(char::is_control) {
        return Err(super::invalid(format!("{what} must be 1 to {MAX_ID} printable characters")));
    }
    Ok(())
}

impl Leases<'_> {
    /// Whether the caller may move leases without the target's consent.
    fn immediate(&self, caller: &Caller<'_>, lease: &Lease) -> bool {
        caller.gate.allows(Rule::LeasesTransferWithoutConsent, owner(lease))
    }

    /// Splits the lease `id` as `asked`; the new lease.
    pub async fn split(&self, caller: &Caller<'_>, id: Uuid, asked: SplitRequest) -> Result<Lease, Error> {
        let lease = find(self, caller, id, Rule::LeasesSplit).await?;
        let own = lease.record.project_id.clone();
        let target = asked.project_id.unwrap_or_else(|| own.clone());
        check_id("project_id", &target)?;
        let (project_id, offer_to) = match target == own || self.immediate(caller, &lease) {
            true => (target, None),
            false => (own, Some(target)),
        };
        let ask = SplitAsk {
            name: asked.name,
            parts: asked.parts,
            project_id,
            offer_to,
            offered_by: caller.user_id.to_string(),
        };
        Ok(self.app.store.split_lease(&caller.meta(None), id, self.scope(caller), ask).await?)
    }

    /// Transfers the lease `id` as `asked`: at once, or as an offer.
    pub async fn transfer(&self, caller: &Caller<'_>, id: Uuid, asked: TransferRequest) -> Result<Transferred, Error> {
        check_id("project_id", &asked.project_id)?;
        let lease = match find(self, caller, id, Rule::LeasesTransfer).await {
            // Pulling a lease one does not own into one's project: never
            // consented to, whether or not the lease exists.
            Err(Error::Domain(e)) if e.code == ErrorCode::LeaseNotFound && asked.project_id == caller.project_id => {
                return Err(no_consent("only the lease's project (or an admin) may hand it over; accept its offer"));
            }
            other => other?,
        };
        let may = self.immediate(caller, &lease);
        let consent = asked.consent.unwrap_or(if may { Consent::Immediate } else { Consent::Offer });
        match consent {
            Consent::Immediate if !may => {
                Err(no_consent("a transfer at once needs berth:leases:transfer_without_consent"))
            }
            Consent::Immediate => {
                if let Some(u) = &asked.user_id {
                    check_id("user_id", u)?;
                }
                let how = Handover::Admin { to_project: asked.project_id, user_id: asked.user_id };
                let meta = caller.meta(Some(caller.gate.name(Rule::LeasesTransferWithoutConsent)));
                Ok(Transferred::Moved(self.app.store.transfer_lease(&meta, id, how).await?))
            }
            Consent::Offer if asked.user_id.is_some() => {
                Err(super::invalid("user_id is for a transfer at once; the user who accepts an offer owns the lease"))
            }
            Consent::Offer => {
                let (meta, scope) = (caller.meta(None), self.scope(caller));
                let offered =
                    self.app.store.offer_transfer(&meta, id, scope, &asked.project_id, caller.user_id).await?;
                Ok(Transferred::Offered(offered))
            }
        }
    }

    /// Accepts the offer of the lease `id` to the caller's project: the
    /// lease becomes the project's and the caller's.
    pub async fn accept_transfer(&self, caller: &Caller<'_>, id: Uuid) -> Result<Lease, Error> {
        caller.authorize(Rule::LeasesAcceptTransfer, crate::Owner::Caller)?;
        let how = Handover::Accept {
            project: caller.project_id.to_string(),
            user_id: caller.user_id.to_string(),
            sees_all: self.scope(caller).is_none(),
        };
        Ok(self.app.store.transfer_lease(&caller.meta(None), id, how).await?)
    }

    /// Withdraws the offer of the lease `id`.
    pub async fn withdraw_transfer(&self, caller: &Caller<'_>, id: Uuid) -> Result<(), Error> {
        find(self, caller, id, Rule::LeasesWithdrawTransfer).await?;
        Ok(self.app.store.withdraw_transfer(&caller.meta(None), id, self.scope(caller)).await?)
    }
}
