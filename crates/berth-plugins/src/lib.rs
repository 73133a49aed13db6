//! berth-plugins: resource plugins and the drivers that carry their effects
//! outside.
//!
//! A plugin handles one reservation type (`physical:host`,
//! `virtual:instance`, or one declared in configuration): it validates a
//! reservation and turns it into a [`ResourceRequest`], and acts at a lease's
//! start, before its end and at its end. Drivers reach the outside world.
//! Plugins never touch the database: a hook returns the [`HookOutcome`] it
//! wants recorded and the manager records it through berth-store.
//! The lease policy is berth-app's (`berth_app::policy`).

#![warn(clippy::arithmetic_side_effects)]

pub mod check;
pub mod config;
pub mod driver;
pub mod external;
pub mod flavor;
pub mod host;
pub mod instance;
pub mod params;
pub mod plugin;
pub mod protocol;
pub mod registry;
pub mod serve;

pub use config::PluginsConfig;
pub use driver::{Driver, DriverConfig};
pub use external::ExternalPlugin;
pub use plugin::{Hook, HookError, HookOutcome, ResourcePlugin, ResourceRequest};
pub use registry::Registry;
