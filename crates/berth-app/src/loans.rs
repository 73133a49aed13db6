//! The loans of idle capacity an operator watches (docs/lending.md).

pub use berth_store::queries::loans::Loan;

use crate::{App, Caller, Error, Rule};

/// The most loans one answer lists.
pub const MAX_LISTED: i64 = 1000;

/// The lending use cases, over one [`App`].
pub struct Loans<'a> {
    app: &'a App,
}

impl Loans<'_> {
    /// The loans not reclaimed yet, or reclaimed within the hour, soonest due first.
    pub async fn list(&self, caller: &Caller<'_>) -> Result<Vec<Loan>, Error> {
        caller.authorize(Rule::LoansList, crate::Owner::Caller)?;
        Ok(self.app.store.loans(MAX_LISTED).await?)
    }
}

impl App {
    pub fn loans(&self) -> Loans<'_> {
        Loans { app: self }
    }
}
