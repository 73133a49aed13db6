//! What a request to replace allocations says, checked before any
//! transaction.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::error::Refusal;
use berth_core::event::Allocation;
use berth_core::{Error, Inventory};
use uuid::Uuid;

use crate::refuse::invalid;

/// What the client says about the consumer's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationCheck {
    /// Do not compare (Placement before 1.28, or a delete).
    Any,
    /// The consumer must not exist yet (`consumer_generation: null`).
    New,
    /// The consumer must be at this generation.
    Exactly(i64),
}

/// The consumer type that asks for a loan of idle capacity (Placement
/// 1.38's `consumer_type`; commands::loans) rather than an allocation.
pub const PREEMPTIBLE: &str = "PREEMPTIBLE";

/// One consumer's whole new allocation set.
#[derive(Debug, Clone)]
pub struct ConsumerAllocations {
    pub consumer: Uuid,
    pub project_id: String,
    pub user_id: String,
    /// `None` keeps an existing consumer's type (a new consumer is untyped).
    pub consumer_type: Option<String>,
    pub generation: GenerationCheck,
    /// Empty: the consumer's allocations are removed.
    pub allocations: Vec<Allocation>,
}

impl ConsumerAllocations {
    /// Whether it asks for a loan.
    pub fn is_loan(&self) -> bool {
        self.consumer_type.as_deref() == Some(PREEMPTIBLE)
    }
}

/// A provider's new inventory within a reshape.
#[derive(Debug, Clone)]
pub struct ReshapeInventory {
    pub provider: Uuid,
    pub expected_generation: i64,
    pub inventories: BTreeMap<String, Inventory>,
}

/// Each consumer once, each amount at least 1.
pub(super) fn check_batch_shape(consumers: &[ConsumerAllocations]) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    for c in consumers {
        if !seen.insert(c.consumer) {
            return Err(invalid(Refusal::ConsumerTwice { consumer: c.consumer }));
        }
        for a in &c.allocations {
            if a.used < 1 {
                let (provider, class, used) = (a.provider, a.resource_class.clone(), a.used);
                return Err(invalid(Refusal::AmountBelowOne { provider, class, used }));
            }
        }
    }
    Ok(())
}
