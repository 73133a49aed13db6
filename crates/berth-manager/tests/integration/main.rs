//! berth-manager's integration tests, one binary: the manager in process
//! on a real database, its hooks against a real HTTP receiver.

mod bursts;
mod manager;
