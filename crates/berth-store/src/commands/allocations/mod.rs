//! Replacing consumers' allocation sets (a claim, a move, a resize, a
//! delete, several consumers at once) and reshaping provider trees: each is
//! all-or-nothing, and capacity is checked at every instant of every window.
//!
//! Generations follow Placement: a request bumps each consumer it writes
//! once, and each provider it allocates from (or empties a consumer from)
//! once, whatever the number of consumers; a plain delete bumps no provider.
//!
//! - request.rs: what a request says, checked before any transaction;
//! - batch.rs: the batch claim, one transaction for requests in flight;
//! - read.rs: the capacity read, one pipelined round trip of locks and reads;
//! - decide.rs: the decision, each request in turn against what was read;
//! - draw.rs: drawing from a reservation's hold;
//! - reshape.rs: a reshape.

mod batch;
mod decide;
mod draw;
mod read;
mod request;
mod reshape;

#[cfg(test)]
mod plan_tests;

pub(crate) use batch::write_allocations;
pub(crate) use decide::{Decision, Request};
pub use request::{ConsumerAllocations, GenerationCheck, ReshapeInventory, PREEMPTIBLE};

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::{Error, Event, EventMeta};
use uuid::Uuid;

use super::{now, record};
use crate::Store;

impl Store {
    /// Replaces the allocation sets of all `consumers` in one transaction.
    pub async fn replace_allocations(
        &self,
        meta: &EventMeta,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<(), Error> {
        request::check_batch_shape(&consumers)?;
        // A preemptible consumer borrows idle capacity (commands::loans), alone.
        if consumers.iter().any(ConsumerAllocations::is_loan) {
            let [request] = <[ConsumerAllocations; 1]>::try_from(consumers).map_err(|_| {
                Error::invalid(ErrorCode::LendInvalid, "a preemptible consumer's allocations are claimed alone")
            })?;
            return self.lend(meta, request).await;
        }
        // A request that names a reservation's class draws from its hold
        // (draw.rs) and is decided alone. Others are decided together with
        // the requests in flight (claims.rs).
        let decision = if draw::names_reservation(&consumers) {
            let request = [Request { meta, consumers: &consumers }];
            let decisions = crate::tx::pipelined!(self, |tx| { write_allocations(tx, &request).await })?;
            decisions.into_iter().next().expect("one decision per request")
        } else {
            self.claims.submit(self, meta, consumers).await?
        };
        match decision {
            Decision::Written => Ok(()),
            Decision::Refused(e) => Err(e),
        }
    }

    /// Removes every allocation of `consumer` (and so the consumer). Bumps no
    /// provider generation. Not found when it holds nothing.
    pub async fn delete_allocations(&self, meta: &EventMeta, consumer: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            let Some(row) = crate::lock::consumers(tx, &[consumer]).await?.into_iter().next() else {
                let refusal = Refusal::NoAllocations { consumer };
                return Err(Error::refused(ErrorKind::NotFound, ErrorCode::NotFound, refusal).into());
            };
            let at = now(tx).await?;
            if row.consumer_type.as_deref() == Some(PREEMPTIBLE) {
                record(tx, meta, &[Event::LoanReturned { consumer, at }]).await?;
                return Ok(());
            }
            let event = Event::AllocationsReplaced {
                consumer,
                project_id: row.project_id,
                user_id: row.user_id,
                consumer_type: row.consumer_type,
                allocations: Vec::new(),
                providers_bumped: Some(Vec::new()),
                at,
            };
            record(tx, meta, &[event]).await?;
            Ok(())
        })
    }

    /// Replaces the inventories of several providers and the allocations of
    /// several consumers together (reshape.rs).
    pub async fn reshape(
        &self,
        meta: &EventMeta,
        inventories: Vec<ReshapeInventory>,
        consumers: Vec<ConsumerAllocations>,
    ) -> Result<(), Error> {
        request::check_batch_shape(&consumers)?;
        for r in &inventories {
            for (class, inv) in &r.inventories {
                inv.validate(class)?;
            }
        }
        crate::tx::pipelined!(self, |tx| { reshape::write(tx, meta, &consumers, &inventories).await })
    }
}
