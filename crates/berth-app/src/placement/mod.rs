//! Placement's use cases, one file per thing it keeps: providers
//! ([`providers`]), their inventories ([`inventories`]) and aggregates
//! ([`aggregates`]) and traits ([`traits`]), resource classes
//! ([`classes`]), consumers' allocations ([`allocations`], the claim),
//! what is held now ([`usages`]), where a request would fit
//! ([`candidates`]), and the reshaper ([`reshaper`]).
//!
//! Placement asks its policy before it reads a request's path or body, so
//! the edge asks first ([`Placement::may`]) and hands the leave it gets,
//! a [`May`], to the operation, which checks it is leave for its own rule.
//! The operations return domain errors; Placement's words, statuses and
//! microversions stay at the edge.

pub mod aggregates;
pub mod allocations;
pub mod candidates;
pub mod classes;
pub mod inventories;
pub mod providers;
pub mod reshaper;
pub mod traits;
pub mod usages;

use berth_core::EventMeta;
pub use berth_store::queries::Provider;
use uuid::Uuid;

use crate::{App, Caller, Error, Owner};

/// Placement's rules, one per action.
pub use crate::caller::PlacementRule as Rule;

/// Placement's use cases, over one [`App`].
pub struct Placement<'a> {
    pub(crate) app: &'a App,
}

/// Leave to follow one [`Rule`], and who has it (for the log). Only
/// [`Placement::may`] makes one.
#[derive(Debug)]
pub struct May {
    rule: Rule,
    meta: EventMeta,
}

impl May {
    /// Who has the leave, when it is leave for `rule`; an operation asks
    /// this first, so a leave for another rule does nothing.
    fn grants(&self, rule: Rule) -> Result<&EventMeta, Error> {
        if self.rule == rule {
            Ok(&self.meta)
        } else {
            Err(Error::Forbidden)
        }
    }

    /// Who has the leave, when it is leave for one of `rules`.
    fn grants_any(&self, rules: &[Rule]) -> Result<&EventMeta, Error> {
        if rules.contains(&self.rule) {
            Ok(&self.meta)
        } else {
            Err(Error::Forbidden)
        }
    }
}

impl App {
    /// Placement's use cases.
    pub fn placement(&self) -> Placement<'_> {
        Placement { app: self }
    }
}

impl<'a> Placement<'a> {
    /// Whether the caller may follow `rule` in its own project (Placement
    /// asks every rule of the caller's own project, but usages').
    pub fn may(&self, caller: &Caller<'_>, rule: Rule) -> Result<May, Error> {
        self.may_on(caller, rule, Owner::Caller)
    }

    /// Whether the caller may follow `rule` on `owner`'s things (usages:
    /// the project a request asks about).
    pub fn may_on(&self, caller: &Caller<'_>, rule: Rule, owner: Owner<'_>) -> Result<May, Error> {
        caller.authorize(crate::Rule::Placement(rule), owner)?;
        Ok(May { rule, meta: meta(caller) })
    }

    /// The provider `uuid`, for any leave (a route names its provider
    /// before it reads its body); not found otherwise.
    pub async fn provider(&self, _: &May, uuid: Uuid) -> Result<Provider, Error> {
        Ok(self.app.store.placement_provider(uuid).await?)
    }

    pub fn allocations(&self) -> allocations::Allocations<'a> {
        allocations::Allocations { app: self.app }
    }

    pub fn inventories(&self) -> inventories::Inventories<'a> {
        inventories::Inventories { app: self.app }
    }

    pub fn providers(&self) -> providers::Providers<'a> {
        providers::Providers { app: self.app }
    }

    pub fn aggregates(&self) -> aggregates::Aggregates<'a> {
        aggregates::Aggregates { app: self.app }
    }

    pub fn candidates(&self) -> candidates::Candidates<'a> {
        candidates::Candidates { app: self.app }
    }

    pub fn classes(&self) -> classes::Classes<'a> {
        classes::Classes { app: self.app }
    }

    pub fn traits(&self) -> traits::Traits<'a> {
        traits::Traits { app: self.app }
    }

    pub fn usages(&self) -> usages::Usages<'a> {
        usages::Usages { app: self.app }
    }

    pub fn reshaper(&self) -> reshaper::Reshaper<'a> {
        reshaper::Reshaper { app: self.app }
    }
}

/// Who did it, for the log: every Placement write is caused by Placement.
fn meta(caller: &Caller<'_>) -> EventMeta {
    let mut meta = caller.meta(Some("placement"));
    meta.request_id = meta.request_id.filter(|id| !id.is_empty());
    meta
}
