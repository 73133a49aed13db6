//! `berth quota ...` and `berth usage`.

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::client::Client;
use crate::Format;

#[derive(Args)]
pub struct Level {
    /// The project's limits (without it: the defaults).
    #[arg(long)]
    project: Option<String>,
    /// A user's limits within --project.
    #[arg(long, requires = "project")]
    user: Option<String>,
}

impl Level {
    fn path(&self) -> String {
        match (&self.project, &self.user) {
            (None, _) => "/v1/quotas/defaults".to_string(),
            (Some(p), None) => format!("/v1/quotas/projects/{p}"),
            (Some(p), Some(u)) => format!("/v1/quotas/projects/{p}/users/{u}"),
        }
    }
}

#[derive(Subcommand)]
pub enum QuotaCommand {
    /// The limits in effect (-1: unlimited; not shown: unlimited), and
    /// where each is set: user, project or default.
    Show(Level),
    /// Set limits: `VCPU=100 MEMORY_MB=32768 leases=10` (-1: unlimited).
    Set {
        #[command(flatten)]
        level: Level,
        /// `RESOURCE=LIMIT`, one or more.
        #[arg(required = true)]
        limits: Vec<String>,
    },
    /// Remove limits (all of the level's when none are named): they fall back
    /// to the level above.
    Unset {
        #[command(flatten)]
        level: Level,
        /// The resources whose limits to remove.
        resources: Vec<String>,
    },
}

#[derive(Args)]
pub struct UsageArgs {
    /// Default: the project of the token (noauth: `user:project`).
    #[arg(long)]
    project: Option<String>,
    /// A user's usage within the project.
    #[arg(long)]
    user: Option<String>,
    /// Default: now.
    #[arg(long)]
    start: Option<String>,
    /// Default: 30 days after the start.
    #[arg(long)]
    end: Option<String>,
}

fn print_quotas(client: &Client, v: &Value) -> Result<()> {
    if matches!(client.format, Format::Json | Format::Yaml) {
        return client.print_document(v);
    }
    // Where each limit comes from: a user's own, or inherited from the
    // project or the defaults.
    let rows: Vec<Vec<String>> = v["quotas"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, l)| vec![k.clone(), l.to_string(), v["sources"][k].as_str().unwrap_or("").to_string()])
        .collect();
    client.print_rows(&["Resource", "Limit", "Source"], &rows);
    for o in v["over_limit"].as_array().into_iter().flatten() {
        let who = match (o["project_id"].as_str(), o["user_id"].as_str()) {
            (Some(p), Some(u)) => format!("user {u} in project {p}"),
            (Some(p), None) => format!("project {p}"),
            _ => "?".to_string(),
        };
        eprintln!("warning: {who} holds {} {}, over its limit of {}", o["usage"], o["resource"], o["limit"]);
    }
    Ok(())
}

pub fn run(client: &Client, c: QuotaCommand) -> Result<()> {
    match c {
        QuotaCommand::Show(level) => {
            let v = client.get(&level.path())?;
            print_quotas(client, &v)?;
        }
        QuotaCommand::Set { level, limits } => {
            let mut quotas = Map::new();
            for l in &limits {
                let (k, v) = l.split_once('=').ok_or_else(|| anyhow!("{l:?} is not RESOURCE=LIMIT"))?;
                let v: i64 = v.trim().parse().map_err(|_| anyhow!("the limit in {l:?} is not a whole number"))?;
                quotas.insert(k.trim().to_string(), json!(v));
            }
            let v = client.call(Method::PUT, &level.path(), Some(&json!({ "quotas": quotas })))?;
            print_quotas(client, &v)?;
        }
        QuotaCommand::Unset { level, resources } => {
            let v = if resources.is_empty() && level.project.is_some() {
                client.call(Method::DELETE, &level.path(), None)?
            } else {
                if resources.is_empty() {
                    return Err(anyhow!("name the default limits to remove"));
                }
                let quotas: Map<String, Value> = resources.iter().map(|r| (r.clone(), Value::Null)).collect();
                client.call(Method::PUT, &level.path(), Some(&json!({ "quotas": quotas })))?
            };
            print_quotas(client, &v)?;
        }
    }
    Ok(())
}

pub fn usage(client: &Client, a: UsageArgs) -> Result<()> {
    let project = match a.project {
        Some(p) => p,
        None => client.token_project(),
    };
    let mut path = match &a.user {
        Some(u) => format!("/v1/quotas/projects/{project}/users/{u}/usage"),
        None => format!("/v1/quotas/projects/{project}/usage"),
    };
    let query: Vec<String> = [("start", &a.start), ("end", &a.end)]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", urlencode(v))))
        .collect();
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let v = client.get(&path)?;
    if matches!(client.format, Format::Json | Format::Yaml) {
        return client.print_document(&v);
    }
    if client.format == Format::Table {
        println!("project {project}: {} to {}", v["start"].as_str().unwrap_or(""), v["end"].as_str().unwrap_or(""));
    }
    let rows: Vec<Vec<String>> = v["usage"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, u)| {
            let limit = if u["limit"] == -1 { "unlimited".to_string() } else { u["limit"].to_string() };
            let over = if u["over_limit"] == true { "OVER" } else { "" };
            vec![k.clone(), limit, u["in_use"].to_string(), u["peak"].to_string(), over.to_string()]
        })
        .collect();
    // `in_use` is now, whatever the window; `peak` is over the window.
    client.print_rows(&["Resource", "Limit", "In use now", "Peak in window", "Over"], &rows);
    Ok(())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
