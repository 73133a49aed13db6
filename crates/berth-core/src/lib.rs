//! berth-core: Berth's domain, with no I/O.
//!
//! Identifiers, time windows, inventories and capacity math, usage over time,
//! quota limits and lease policy rules, the typed domain errors, and the
//! events of the append-only log. Everything here is pure: no database, no
//! HTTP, no clock reads except where a caller passes `now` in. The store, the
//! API and the manager build on these types; this crate depends on none of
//! them.

#![warn(clippy::arithmetic_side_effects)]

mod code;
pub mod dates;
pub mod draw;
pub mod error;
pub mod event;
pub mod flavor;
pub mod host;
pub mod inventory;
pub mod lease;
pub mod lease_event;
pub mod lend;
pub mod names;
pub mod offer;
pub mod policy;
pub mod query;
pub mod quota;
mod refusal;
pub mod schedule;
pub mod share;
pub mod time;
pub mod timeline;
pub mod window;
pub mod zone;

pub use error::{Error, Result};
pub use event::{Event, EventMeta};
pub use inventory::Inventory;
pub use window::Window;
