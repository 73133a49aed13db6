//! berth: the command-line client. Talks to berthd over HTTP (`BERTH_URL`;
//! `BERTH_TOKEN`, or Keystone credentials as the openstack client takes
//! them). It never reaches the database and decides nothing the server
//! decides; of Berth's crates it uses berth-core only, to read what a user
//! types (durations) by the server's own rule, so both refuse alike.

#![warn(clippy::arithmetic_side_effects)]

mod auth;
mod client;
mod events;
mod hosts;
mod leases;
mod quotas;

use clap::{Parser, Subcommand, ValueEnum};

use client::Client;

#[derive(Parser)]
#[command(name = "berth", version, about = "Berth client: leases, hosts, quotas, usages, events")]
struct Cli {
    /// berthd's base URL.
    #[arg(long, global = true, env = "BERTH_URL", default_value = "http://127.0.0.1:8778")]
    url: String,
    #[command(flatten)]
    auth: auth::AuthArgs,
    /// Output format.
    #[arg(short = 'f', long = "format", global = true, value_enum, default_value = "table")]
    format: Format,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Leases: create, list, show, update, delete.
    #[command(subcommand)]
    Lease(leases::LeaseCommand),
    /// Reservable hosts: create (enrol), list, show, update, delete, allocations.
    #[command(subcommand)]
    Host(hosts::HostCommand),
    /// When would a lease fit? The earliest windows for the reservations given.
    Availability(leases::AvailabilityArgs),
    /// Quota limits: show, set, unset (defaults, a project, a user in it).
    #[command(subcommand)]
    Quota(quotas::QuotaCommand),
    /// A project's (or user's) usage against its limits, over a window.
    Usage(quotas::UsageArgs),
    /// Lease events: list, or tail them as they change (--follow).
    #[command(subcommand)]
    Events(events::EventsCommand),
    /// The event log (admin): tail it, live with --follow.
    #[command(subcommand)]
    Log(events::LogCommand),
    /// The server's version document.
    Version,
}

fn main() {
    // Piped into `head` and the like, stop quietly like any other command
    // line tool instead of failing on a closed stdout.
    // SAFETY: restoring the default disposition of a signal at start-up.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let identity = match cli.auth.identity() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("berth: {e:#}");
            std::process::exit(1);
        }
    };
    let client = Client::new(&cli.url, identity, cli.format);
    let result = match cli.command {
        Some(Command::Lease(c)) => leases::run(&client, c),
        Some(Command::Host(c)) => hosts::run(&client, c),
        Some(Command::Availability(a)) => leases::availability(&client, a),
        Some(Command::Quota(c)) => quotas::run(&client, c),
        Some(Command::Usage(a)) => quotas::usage(&client, a),
        Some(Command::Events(c)) => events::run_events(&client, c),
        Some(Command::Log(c)) => events::run_log(&client, c),
        Some(Command::Version) | None => client.get("/").map(|v| client.print_object(&v)),
    };
    if let Err(e) = result {
        eprintln!("berth: {e:#}");
        std::process::exit(1);
    }
}
