//! berth: the command-line client. Talks to berthd over HTTP (`BERTH_URL`;
//! `BERTH_TOKEN`, or Keystone credentials as the openstack client takes
//! them). It never reaches the database and decides nothing the server
//! decides; of Berth's crates it uses berth-core, to read what a user
//! types (durations) by the server's own rule, so both refuse alike, and
//! berth-plugins for `berth plugin check`, which drives a plugin with
//! Berth's own drivers and checks its answers as Berth does.

#![warn(clippy::arithmetic_side_effects)]

mod auth;
mod client;
mod events;
mod hosts;
mod leases;
mod maintenance;
mod offers;
mod plugin;
mod quotas;
mod sharing;
mod transfers;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use client::Client;

/// The heading of the options every command takes, apart from its own.
pub const GLOBAL: &str = "Global options";

#[derive(Parser)]
#[command(name = "berth", version, about = "Berth client: leases, hosts, maintenance, quotas, usages, events")]
struct Cli {
    /// berthd's base URL; for `plugin check`, the plugin's webhook URL
    /// (given on the command line only).
    #[arg(long, global = true, env = "BERTH_URL", default_value = "http://127.0.0.1:8778", help_heading = GLOBAL)]
    url: String,
    #[command(flatten)]
    auth: auth::AuthArgs,
    /// Output format, as the openstack client's: table, json, yaml, value or csv.
    #[arg(short = 'f', long = "format", global = true, value_enum, default_value = "table", help_heading = GLOBAL)]
    format: Format,
    /// A column (or field) to print; repeatable, in the order given; all when absent.
    #[arg(short = 'c', long = "column", global = true, help_heading = GLOBAL)]
    columns: Vec<String>,
    /// Show times in this IANA zone (`Europe/Paris`), with their offset;
    /// UTC when absent. What is shown, every date option takes back.
    #[arg(long = "tz", global = true, env = "BERTH_TZ", value_parser = zone, help_heading = GLOBAL)]
    tz: Option<chrono_tz::Tz>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// An IANA zone as the API reads one, refused in its words.
pub fn zone(s: &str) -> std::result::Result<chrono_tz::Tz, String> {
    berth_core::zone::parse_zone("time zone", s).map_err(|e| e.detail)
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table fitted to the terminal's width.
    Table,
    /// JSON, whole documents.
    Json,
    /// YAML, whole documents.
    Yaml,
    /// The values only: a row per line, separated by spaces.
    Value,
    /// Comma-separated, with a header line.
    Csv,
}

#[derive(Subcommand)]
enum Command {
    /// Leases: create, list, show, update, delete, end, recover.
    #[command(subcommand)]
    Lease(leases::LeaseCommand),
    /// Reservable hosts: create (enrol), list, show, update, delete, allocations.
    #[command(subcommand)]
    Host(hosts::HostCommand),
    /// Maintenance windows (admin): create, list, delete.
    #[command(subcommand)]
    Maintenance(maintenance::MaintenanceCommand),
    /// When would a lease fit? The earliest windows for the reservations given.
    Availability(leases::AvailabilityArgs),
    /// Offers: windows where a lease fits, the longest and largest that
    /// fit, each with the id that books it (`lease create NAME --offer ID`).
    Offers(offers::OffersArgs),
    /// Quota limits: show, set, unset (defaults, a project, a user in it).
    #[command(subcommand)]
    Quota(quotas::QuotaCommand),
    /// A project's (or user's) usage against its limits, over a window.
    Usage(quotas::UsageArgs),
    /// Lease events: list, tail them as they change (--follow), retry, cancel, fire.
    #[command(subcommand)]
    Events(events::EventsCommand),
    /// The manager (admin): status, pause, resume.
    #[command(subcommand)]
    Manager(events::ManagerCommand),
    /// The event log (admin): tail it, live with --follow.
    #[command(subcommand)]
    Log(events::LogCommand),
    /// Plugin authors: check a plugin against the protocol (no server needed).
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// The server's version document.
    Version,
    /// Print a shell completion script: `source <(berth completion bash)`.
    Completion {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() {
    // Piped into `head` and the like, stop quietly like any other command
    // line tool instead of failing on a closed stdout.
    // SAFETY: restoring the default disposition of a signal at start-up.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some(Command::Lease(leases::LeaseCommand::Create(a))) = &cli.command {
        // A usage error, as clap says its own: exit code 2, nothing sent.
        if let Some(why) = a.usage_error() {
            clap::Error::raw(clap::error::ErrorKind::MissingRequiredArgument, format!("{why}\n")).exit();
        }
    }
    if let Some(Command::Completion { shell }) = cli.command {
        // Needs no server and no credentials.
        clap_complete::generate(shell, &mut Cli::command(), "berth", &mut std::io::stdout());
        return;
    }
    if let Some(Command::Plugin(c)) = cli.command {
        // Needs no server either; --url, when given on the command line
        // (not BERTH_URL, not the default), is the plugin's webhook.
        let given = |m: &clap::ArgMatches| m.value_source("url") == Some(clap::parser::ValueSource::CommandLine);
        let in_sub = matches.subcommand().and_then(|(_, m)| m.subcommand()).is_some_and(|(_, m)| given(m));
        let url = (given(&matches) || in_sub).then_some(cli.url.as_str());
        match plugin::run(c, url) {
            Ok(0) => return,
            Ok(_) => std::process::exit(1),
            Err(e) => {
                eprintln!("berth: {e:#}");
                std::process::exit(2);
            }
        }
    }
    let identity = match cli.auth.identity() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("berth: {e:#}");
            std::process::exit(1);
        }
    };
    let client = Client::new(&cli.url, identity, cli.format, cli.columns, cli.tz);
    let result = match cli.command {
        Some(Command::Lease(c)) => leases::run(&client, c),
        Some(Command::Host(c)) => hosts::run(&client, c),
        Some(Command::Maintenance(c)) => maintenance::run(&client, c),
        Some(Command::Availability(a)) => leases::availability(&client, a),
        Some(Command::Offers(a)) => offers::offers(&client, a),
        Some(Command::Quota(c)) => quotas::run(&client, c),
        Some(Command::Usage(a)) => quotas::usage(&client, a),
        Some(Command::Events(c)) => events::run_events(&client, c),
        Some(Command::Manager(c)) => events::run_manager(&client, c),
        Some(Command::Log(c)) => events::run_log(&client, c),
        Some(Command::Version) | None => client.get("/").and_then(|v| client.print_object(&v)),
        Some(Command::Completion { .. } | Command::Plugin(_)) => unreachable!("answered before authenticating"),
    };
    if let Err(e) = result {
        eprintln!("berth: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option and argument of every command says what it is for.
    #[test]
    fn every_option_and_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        walk(&cmd, "berth", &mut missing);
        assert!(missing.is_empty(), "options and arguments without help:\n{}", missing.join("\n"));
    }
}
