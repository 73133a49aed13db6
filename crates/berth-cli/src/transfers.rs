//! `berth lease split`, `berth lease transfer` (and `--withdraw`) and
//! `berth lease accept`: part of a lease into a new one, or a lease to
//! another project.

use anyhow::{anyhow, Result};
use clap::Args;
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::lease_id;
use crate::client::Client;

#[derive(Args)]
pub struct SplitArgs {
    /// The lease's id or name.
    pub lease: String,
    /// The new lease's name.
    #[arg(long)]
    pub name: String,
    /// The reservation to split (default: the lease's only one).
    #[arg(long)]
    pub reservation: Option<String>,
    /// The hosts that move (ids or names, comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "count", required_unless_present = "count")]
    pub hosts: Vec<String>,
    /// How many hosts or instance slots move (any).
    #[arg(long)]
    pub count: Option<u32>,
    /// The new lease's project (an admin's goes there; a member's is offered there).
    #[arg(long)]
    pub project: Option<String>,
}

#[derive(Args)]
pub struct TransferArgs {
    /// The lease's id or name.
    pub lease: String,
    /// The project it goes to.
    #[arg(long, required_unless_present = "withdraw", conflicts_with = "withdraw")]
    pub project: Option<String>,
    /// Its user once moved at once (admin; default: its own).
    #[arg(long)]
    pub user: Option<String>,
    /// Offer it even where it could be moved at once.
    #[arg(long)]
    pub offer: bool,
    /// Withdraw the offer made of it.
    #[arg(long)]
    pub withdraw: bool,
}

/// The only reservation of the lease `id`, where none is named.
fn only_reservation(client: &Client, id: &str) -> Result<String> {
    let lease = client.get(&format!("/v1/leases/{id}"))?;
    match lease["lease"]["reservations"].as_array().map(Vec::as_slice) {
        Some([one]) => Ok(one["id"].as_str().unwrap_or_default().to_string()),
        _ => Err(anyhow!("the lease has several reservations: name one with --reservation")),
    }
}

pub fn split(client: &Client, a: SplitArgs) -> Result<()> {
    let id = lease_id(client, &a.lease)?;
    let reservation = match a.reservation {
        Some(r) => r,
        None => only_reservation(client, &id)?,
    };
    let mut part = json!({ "id": reservation });
    match a.count {
        Some(n) => part["count"] = json!(n),
        None => part["hosts"] = json!(a.hosts),
    }
    let mut body = json!({ "name": a.name, "reservations": [part] });
    if let Some(p) = a.project {
        body["project_id"] = json!(p);
    }
    let out = client.call(Method::POST, &format!("/v1/leases/{id}/split"), Some(&body))?;
    client.print_object(&out["lease"])
}

pub fn transfer(client: &Client, a: TransferArgs) -> Result<()> {
    let id = lease_id(client, &a.lease)?;
    let path = format!("/v1/leases/{id}/transfer");
    if a.withdraw {
        client.call(Method::DELETE, &path, None)?;
        if client.format == crate::Format::Table {
            println!("Withdrew the transfer of lease {id}");
        }
        return Ok(());
    }
    let mut body = json!({ "project_id": a.project });
    if let Some(u) = a.user {
        body["user_id"] = json!(u);
    }
    if a.offer {
        body["consent"] = json!("offer");
    }
    let out = client.call(Method::POST, &path, Some(&body))?;
    match out.get("lease") {
        Some(lease) => client.print_object(lease),
        None => client.print_object(&out),
    }
}

pub fn accept(client: &Client, lease: &str) -> Result<()> {
    // A lease offered to the caller's project is not among those it lists.
    let id = match uuid::Uuid::parse_str(lease) {
        Ok(_) => lease.to_string(),
        Err(_) => lease_id(client, lease)?,
    };
    let out: Value = client.call(Method::POST, &format!("/v1/leases/{id}/transfer/accept"), Some(&json!({})))?;
    client.print_object(&out["lease"])
}
