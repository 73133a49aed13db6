//! berth-plugins: resource plugins and the drivers that carry their effects
//! outside.
//!
//! A plugin handles one reservation type (`physical:host`,
//! `virtual:instance`, or one declared in configuration): it turns a
//! reservation into a resource request and acts at a lease's start, before
//! its end and at its end. Drivers (`noop`, `webhook`, `exec`) reach the
//! outside world. Plugins never touch the database; they return what they
//! want done and the manager records it.
//!
//! Filled in by the lease and manager work; this crate states its place.
