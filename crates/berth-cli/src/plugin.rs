//! `berth plugin check`: a plugin driven through every action of the
//! protocol before a lease depends on it, with berth-plugins' own drivers
//! and checks (`berth_plugins::check`). It needs no server and no database.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use berth_plugins::check::{self, Options};
use berth_plugins::driver::{Driver, ExecConfig, WebhookConfig};
use berth_plugins::DriverConfig;
use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Drive a plugin through every action with made-up payloads and check
    /// its answers; one line per check, then a summary; exit 1 on any failure.
    /// The plugin: --exec PROGRAM [ARGS], or --url URL (its webhook).
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// Run PROGRAM with ARGS once per call, as the exec driver does (its
    /// environment is this command's).
    #[arg(long, num_args = 1.., value_name = "PROGRAM [ARGS]")]
    exec: Vec<String>,
    /// Sign each body with this secret, as the webhook driver does (X-Berth-Signature).
    #[arg(long)]
    secret: Option<String>,
    /// The resource type the plugin serves, e.g. virtual:floatingip.
    #[arg(long = "type", value_name = "TYPE")]
    resource_type: String,
    /// A reservation the plugin must accept: its parameters, as JSON.
    #[arg(long, value_name = "JSON", default_value = r#"{"amount": 1}"#)]
    reservation: String,
    /// A reservation the plugin must refuse, as JSON (repeatable); an unknown
    /// parameter and a wrong type for each parameter are always tried.
    #[arg(long = "bad-reservation", value_name = "JSON")]
    bad_reservations: Vec<String>,
    /// How long a call may take, as the driver's timeout_ms.
    #[arg(long, value_name = "MS", default_value_t = berth_plugins::driver::DEFAULT_TIMEOUT_MS)]
    timeout_ms: u64,
}

fn json(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{what} is not JSON: {text}"))
}

/// The driver's configuration for the plugin given: exec or webhook.
fn driver_config(args: &CheckArgs, url: Option<&str>, timeout: Duration) -> Result<DriverConfig> {
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
    Ok(match (args.exec.split_first(), url) {
        (Some((program, rest)), None) => {
            if args.secret.is_some() {
                bail!("--secret signs webhook calls: give it with --url");
            }
            DriverConfig::Exec(ExecConfig {
                program: program.into(),
                args: rest.to_vec(),
                env: BTreeMap::new(),
                cwd: None,
                timeout_ms,
            })
        }
        (None, Some(url)) => DriverConfig::Webhook(WebhookConfig {
            url: url.to_string(),
            secret: args.secret.clone(),
            timeout_ms,
            headers: BTreeMap::new(),
        }),
        (Some(_), Some(_)) => bail!("give either --exec or --url, not both"),
        (None, None) => bail!("give the plugin: --exec PROGRAM [ARGS] or --url URL"),
    })
}

/// Runs the checks; the number that failed.
pub fn run(command: PluginCommand, url: Option<&str>) -> Result<usize> {
    let PluginCommand::Check(args) = command;
    let opts = Options {
        resource_type: args.resource_type.clone(),
        reservation: json("--reservation", &args.reservation)?,
        bad_reservations: args.bad_reservations.iter().map(|b| json("--bad-reservation", b)).collect::<Result<_>>()?,
        timeout: Duration::from_millis(args.timeout_ms),
    };
    if !opts.reservation.is_object() {
        bail!("--reservation is a JSON object: the reservation's parameters");
    }
    let config = driver_config(&args, url, opts.timeout)?;
    if let DriverConfig::Exec(e) = &config {
        e.check_program().map_err(|why| anyhow::anyhow!("{}: {why}", e.program.display()))?;
    }
    let make = |limit: Duration| -> std::result::Result<Arc<dyn Driver>, String> {
        driver_config(&args, url, limit).map_err(|e| e.to_string())?.build().map_err(|e| e.detail)
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let report = runtime.block_on(check::run(&make, &opts, &mut |c| println!("{c}")));
    println!("{}", report.summary());
    Ok(report.failed())
}
