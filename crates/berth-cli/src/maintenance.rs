//! `berth maintenance ...` (admin): hosts reserved for maintenance over a
//! window, even where leases hold them.

use anyhow::Result;
use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::Client;
use crate::hosts::host_id;

#[derive(Subcommand)]
pub enum MaintenanceCommand {
    /// Reserve hosts for maintenance over a window: they are placed nowhere
    /// then, and the leases holding them are flagged (moved with --heal).
    Create {
        /// A host's id or name; repeatable.
        #[arg(long = "host", required = true)]
        hosts: Vec<String>,
        /// When the window starts (`YYYY-MM-DD HH:MM`, or `now`).
        #[arg(long)]
        start: String,
        /// When the window ends (`YYYY-MM-DD HH:MM`).
        #[arg(long)]
        end: String,
        /// Move the leases hit to other hosts at once.
        #[arg(long)]
        heal: bool,
        /// Why, for the record.
        #[arg(long)]
        reason: Option<String>,
    },
    /// The maintenance windows not over yet.
    List,
    /// Cancel a maintenance window; what it flagged heals at the manager's
    /// next sweep.
    Delete {
        /// The window's id.
        id: String,
    },
}

const COLUMNS: &[&str] = &["id", "hosts", "start_date", "end_date", "heal", "reason"];

pub fn run(client: &Client, cmd: MaintenanceCommand) -> Result<()> {
    match cmd {
        MaintenanceCommand::Create { hosts, start, end, heal, reason } => {
            let ids: Vec<String> = hosts.iter().map(|h| host_id(client, h)).collect::<Result<_>>()?;
            let body = json!({"hosts": ids, "start_date": start, "end_date": end, "heal": heal, "reason": reason});
            let out = client.call(Method::POST, "/v1/maintenance", Some(&body))?;
            if matches!(client.format, crate::Format::Json | crate::Format::Yaml) {
                return client.print_document(&out);
            }
            client.print_object(&out["maintenance"])?;
            let hit = out["leases"].as_array().cloned().unwrap_or_default();
            if !hit.is_empty() && client.format == crate::Format::Table {
                println!("Leases hit:");
                client.print_list(&hit, &["lease_id", "reservation_id", "moved", "missing"])?;
            }
        }
        MaintenanceCommand::List => {
            let all = client.get("/v1/maintenance")?;
            let list: &[Value] = all["maintenance"].as_array().map(Vec::as_slice).unwrap_or_default();
            client.print_list(list, COLUMNS)?;
        }
        MaintenanceCommand::Delete { id } => {
            client.call(Method::DELETE, &format!("/v1/maintenance/{id}"), None)?;
            if client.format == crate::Format::Table {
                println!("Cancelled maintenance window {id}");
            }
        }
    }
    Ok(())
}
