//! The manager's commands: claim due lease events, renew claims, record what
//! their hooks did, and return hosts held back at a lease's end.
//!
//! Claiming ([`claim`]), recording outcomes ([`finish`]) and carrying out
//! the effects hooks ask for ([`effects`]), hosts held back ([`held`]), and
//! the `on_heal` calls owed after a heal ([`heal_hooks`]), the `on_update`
//! calls owed after a share ([`update_hooks`]).

mod claim;
#[cfg(test)]
mod claim_tests;
mod control;
mod effects;
mod finish;
mod heal_hooks;
mod held;
mod owed;
mod update_hooks;

pub use claim::{Claim, Claimed, KeptConnection};
pub use finish::{Finish, Outcome, Recorded};
pub use heal_hooks::HealHook;
pub use held::HeldHost;
pub use update_hooks::UpdateHook;

use berth_core::EventMeta;

fn manager_meta(claimer: &str) -> EventMeta {
    EventMeta { actor: Some(format!("manager:{claimer}")), ..Default::default() }
}
