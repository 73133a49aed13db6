//! `berth host ...`.

use anyhow::{anyhow, Result};
use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::client::{key_values, Client};

#[derive(Subcommand)]
pub enum HostCommand {
    /// Enrol a provider (by name) as a reservable host, creating it when
    /// --vcpus, --memory-mb and --local-gb are given.
    Create {
        /// The provider's name (its hypervisor hostname).
        name: String,
        /// VCPUs, when creating the provider.
        #[arg(long)]
        vcpus: Option<i64>,
        /// Memory in MiB, when creating the provider.
        #[arg(long)]
        memory_mb: Option<i64>,
        /// Disk in GiB, when creating the provider.
        #[arg(long)]
        local_gb: Option<i64>,
        /// An extra capability, `key=value`; repeatable.
        #[arg(long = "extra")]
        extra: Vec<String>,
        /// The request's idempotency key (default: a new one for each
        /// command). The command tries again with it when the request may
        /// not have arrived; the same key with the same request within a day
        /// answers the host first enrolled.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// List the reservable hosts.
    List,
    /// Show a host (by id or name).
    Show {
        /// The host's id or name.
        host: String,
    },
    /// Set extra capabilities (`key=value`; an empty value removes one) or
    /// reservability; disable a host (the reservations holding it move to
    /// other hosts) or enable it again.
    Update {
        /// The host's id or name.
        host: String,
        /// An extra capability, `key=value` (empty value: remove it); repeatable.
        #[arg(long = "extra")]
        extra: Vec<String>,
        /// Whether leases may take the host.
        #[arg(long)]
        reservable: Option<bool>,
        /// Make the host unusable: placed nowhere, its reservations healed.
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        /// Make a disabled host usable again (nothing moves back).
        #[arg(long)]
        enable: bool,
    },
    /// Take a host out of the pool (refused while a lease holds it).
    Delete {
        /// The host's id or name.
        host: String,
    },
    /// Which reservations hold which hosts.
    Allocations {
        /// Only this host.
        host: Option<String>,
        /// Only this lease's allocations.
        #[arg(long)]
        lease_id: Option<String>,
        /// Only this reservation's allocations.
        #[arg(long)]
        reservation_id: Option<String>,
    },
}

const COLUMNS: &[&str] = &["id", "hypervisor_hostname", "vcpus", "memory_mb", "local_gb", "reservable", "disabled"];

pub(crate) fn host_id(client: &Client, given: &str) -> Result<String> {
    if uuid::Uuid::parse_str(given).is_ok() {
        return Ok(given.to_string());
    }
    let all = client.get_all("/v1/os-hosts", "hosts")?;
    all.iter()
        .find(|h| h["hypervisor_hostname"] == given)
        .and_then(|h| h["id"].as_str().map(str::to_string))
        .ok_or_else(|| anyhow!("no host named {given:?}"))
}

fn extras(list: &[String], empty_removes: bool) -> Result<Map<String, Value>> {
    let mut o = Map::new();
    for s in list {
        for (k, v) in key_values(s)? {
            let v = if v.is_empty() && empty_removes { Value::Null } else { Value::String(v) };
            o.insert(k, v);
        }
    }
    Ok(o)
}

fn print_allocations(client: &Client, list: &[Value]) -> Result<()> {
    let rows: Vec<Value> = list
        .iter()
        .map(|a| {
            let res: Vec<String> = a["reservations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| format!("{} (lease {})", r["id"].as_str().unwrap_or(""), r["lease_id"].as_str().unwrap_or("")))
                .collect();
            json!({"resource_id": a["resource_id"], "reservations": res.join("\n")})
        })
        .collect();
    if matches!(client.format, crate::Format::Json | crate::Format::Yaml) {
        client.print_list(list, &[])
    } else {
        client.print_list(&rows, &["resource_id", "reservations"])
    }
}

pub fn run(client: &Client, cmd: HostCommand) -> Result<()> {
    match cmd {
        HostCommand::Create { name, vcpus, memory_mb, local_gb, extra, idempotency_key } => {
            let mut body = extras(&extra, false)?;
            body.insert("name".into(), json!(name));
            for (k, v) in [("vcpus", vcpus), ("memory_mb", memory_mb), ("local_gb", local_gb)] {
                if let Some(v) = v {
                    body.insert(k.into(), json!(v));
                }
            }
            let key = idempotency_key.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let out = client.post_keyed("/v1/os-hosts", &Value::Object(body), &key)?;
            client.print_object(&out["host"])?;
        }
        HostCommand::List => {
            client.print_list(&client.get_all("/v1/os-hosts", "hosts")?, COLUMNS)?;
        }
        HostCommand::Show { host } => {
            let out = client.get(&format!("/v1/os-hosts/{}", host_id(client, &host)?))?;
            client.print_object(&out["host"])?;
        }
        HostCommand::Update { host, extra, reservable, disable, enable } => {
            let id = host_id(client, &host)?;
            let mut body = extras(&extra, true)?;
            if let Some(r) = reservable {
                body.insert("reservable".into(), json!(r));
            }
            if disable || enable {
                body.insert("disabled".into(), json!(disable));
            }
            let out = client.call(Method::PUT, &format!("/v1/os-hosts/{id}"), Some(&Value::Object(body)))?;
            client.print_object(&out["host"])?;
            let name = out["host"]["hypervisor_hostname"].as_str().unwrap_or(&host).to_string();
            let mut names = std::collections::HashMap::new();
            for h in out["healed"].as_array().into_iter().flatten().filter(|_| client.format == crate::Format::Table) {
                println!("{}", healed_line(client, h, &name, &mut names));
            }
        }
        HostCommand::Delete { host } => {
            let id = host_id(client, &host)?;
            client.call(Method::DELETE, &format!("/v1/os-hosts/{id}"), None)?;
            if client.format == crate::Format::Table {
                println!("Deleted host {id}");
            }
        }
        HostCommand::Allocations { host, lease_id, reservation_id } => {
            let mut q = Vec::new();
            if let Some(l) = lease_id {
                q.push(format!("lease_id={l}"));
            }
            if let Some(r) = reservation_id {
                q.push(format!("reservation_id={r}"));
            }
            let query = if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) };
            match host {
                Some(h) => {
                    let out = client.get(&format!("/v1/os-hosts/{}/allocation{query}", host_id(client, &h)?))?;
                    print_allocations(client, std::slice::from_ref(&out["allocation"]))?;
                }
                None => {
                    let all = client.get_all(&format!("/v1/os-hosts/allocations{query}"), "allocations")?;
                    print_allocations(client, &all)?;
                }
            }
        }
    }
    Ok(())
}

/// One lease a heal touched, by its name where the caller may read it:
/// `lease workshop (ID), reservation ID: 1 moved off compute-1, 0 missing`.
/// `names`: the leases looked up already (a lease of several reservations
/// is asked for once).
fn healed_line(
    client: &Client,
    h: &Value,
    host: &str,
    names: &mut std::collections::HashMap<String, Option<String>>,
) -> String {
    let lease = h["lease_id"].as_str().unwrap_or_default();
    let name = names.entry(lease.to_string()).or_insert_with(|| {
        let named = client.get(&format!("/v1/leases/{lease}")).ok();
        named.and_then(|l| l["lease"]["name"].as_str().map(str::to_string))
    });
    let label = match name {
        Some(name) => format!("lease {name} ({lease})"),
        None => format!("lease {lease}"),
    };
    format!(
        "{label}, reservation {}: {} moved off {host}, {} missing",
        h["reservation_id"].as_str().unwrap_or_default(),
        h["moved"],
        h["missing"]
    )
}
