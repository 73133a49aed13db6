//! Allocation candidates: where a request would fit, now and open-ended.
//! The search reads what it needs at once; its walk yields candidates as
//! the caller consumes them, and the summaries of the providers the walk
//! used are read after it.

use std::collections::{BTreeMap, BTreeSet};

pub use berth_store::queries::candidates::{
    Candidate, CandidateGroup, CandidateRequest, CandidateSearch, ProviderSummary,
};
use berth_store::Store;
use uuid::Uuid;

use super::{May, Rule};
use crate::{App, Error};

/// Placement's candidate use cases, over one [`App`].
pub struct Candidates<'a> {
    pub(crate) app: &'a App,
}

/// A search made, to walk; then its providers' summaries to read.
pub struct Found {
    store: Store,
    pub search: CandidateSearch,
}

impl Candidates<'_> {
    /// The search `req` asks for (its classes must exist).
    pub async fn search(&self, may: &May, req: CandidateRequest) -> Result<Found, Error> {
        may.grants(Rule::AllocationCandidates)?;
        let search = self.app.store.candidate_search(req).await?;
        Ok(Found { store: self.app.store.clone(), search })
    }
}

impl Found {
    /// The summaries of the providers `used` (those the walk yielded).
    pub async fn summaries(&self, used: &BTreeSet<Uuid>) -> Result<BTreeMap<Uuid, ProviderSummary>, berth_core::Error> {
        self.store.candidate_summaries(&self.search, used).await
    }
}
