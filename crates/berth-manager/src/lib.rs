//! berth-manager: fires every lease event on time.
//!
//! Claims due lease events in one statement (`FOR UPDATE SKIP LOCKED`) with a
//! claim expiry it renews while a plugin hook runs, records each outcome as
//! log events, and rescues claims whose owner died. It knows no HTTP and
//! writes no SQL of its own: it calls berth-store and berth-plugins.
//!
//! Filled in by the manager work; this crate states its place.
