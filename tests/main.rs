//! Black-box tests of berthd and the berth CLI, one module per area; the
//! failover tests (`ha`) are ignored here and run by `make test-ha`, the
//! rolling upgrade (`upgrade`) by `make test-upgrade`.

mod authorization;
mod backup;
mod blazarclient;
mod cleaning;
mod cli;
mod clock;
mod config;
mod console;
mod controls_cli;
mod daemon;
mod events_cli;
mod flavor_cli;
mod follow;
mod ha;
mod hardening;
mod heal;
mod heal_cli;
mod jwt_api;
mod keystone;
mod leases_api;
mod lending;
mod log_tail;
mod manager;
mod observability;
mod offers_api;
mod openapi;
mod output;
mod plugin_check;
mod plugin_tutorial;
mod plugins_api;
mod policy_file;
mod quotas_api;
mod quotas_cli;
mod readme_tour;
mod sharing;
mod transfers;
mod upgrade;
