//! berth-app: Berth's use cases, one operation each, between the edges
//! (berth-api's HTTP handlers, the manager) and the store.
//!
//! It owns what a use case decides: who may do it (asked through the
//! caller's [`Gate`]), the idempotency rules of a create, each reservation's
//! resolution through its plugin, the database's clock for what must be
//! resolved before a command, recurrence, the instance check, and the lease
//! policy (the built-in rules and the external policy service, [`policy`]),
//! then the store's commands and queries.
//!
//! It never speaks HTTP (no status, header or document: the edges parse a
//! request into a typed one and render the domain result or [`Error`]),
//! never reads the local clock, and never writes SQL (berth-store does).

pub mod advice;
pub mod calendar;
mod caller;
pub mod changes;
pub mod events;
pub mod health;
pub mod hosts;
pub mod idempotency;
pub mod leases;
pub mod loans;
pub mod log;
pub mod maintenance;
pub mod offer_token;
pub mod offers;
pub mod placement;
pub mod plugins;
pub mod policy;
pub mod quotas;
pub mod reads;

use std::sync::Arc;

use berth_store::Store;

pub use caller::{Allowed, Caller, Error, Gate, Owner, Rule};
pub use policy::{Policy, PolicyConfig};

/// What the operations reach: the store, the enabled resource plugins and
/// the lease policy. Cheap to clone (shared parts).
#[derive(Clone)]
pub struct App {
    store: Store,
    plugins: Arc<berth_plugins::Registry>,
    policy: Arc<Policy>,
}

impl App {
    pub fn new(store: Store, plugins: Arc<berth_plugins::Registry>, policy: Arc<Policy>) -> App {
        App { store, plugins, policy }
    }

    /// Over `store` alone: no resource plugins, the default lease policy
    /// (what serving Placement, and nothing of Blazar's, needs).
    pub fn bare(store: Store) -> App {
        App::new(store, Arc::default(), Arc::default())
    }

    /// The lease use cases.
    pub fn leases(&self) -> leases::Leases<'_> {
        leases::Leases { app: self }
    }
}
