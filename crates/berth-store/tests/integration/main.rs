//! berth-store's integration tests, one binary: the store's commands,
//! queries and replay against a real PostgreSQL, under concurrency.

mod common;

mod atomicity;
mod candidates_paged;
mod capacity;
mod controls;
mod enrolments;
mod free_spans;
mod heal;
mod leases;
mod log_cursor;
mod manager_claims;
mod quota_properties;
mod quotas;
mod replay;
mod retries;
