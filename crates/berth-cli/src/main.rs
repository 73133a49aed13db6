//! berth: the command-line client. Talks to berthd over HTTP (`BERTH_URL`,
//! `BERTH_TOKEN`); depends on berth-core types only.

use clap::Parser;

#[derive(Parser)]
#[command(name = "berth", version, about = "Berth client: leases, hosts, quotas, usages, events")]
struct Cli {
    /// berthd's base URL.
    #[arg(long, env = "BERTH_URL", default_value = "http://127.0.0.1:8778")]
    url: String,
    /// The token sent as X-Auth-Token.
    #[arg(long, env = "BERTH_TOKEN", default_value = "admin")]
    token: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let body: serde_json::Value = reqwest::blocking::Client::new()
        .get(format!("{}/", cli.url.trim_end_matches('/')))
        .header("x-auth-token", &cli.token)
        .send()?
        .error_for_status()?
        .json()?;
    println!("{}", serde_json::to_string_pretty(&body)?);
    Ok(())
}
