//! The yardstick: pgbench's TPC-B-like run on the same server.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

fn pgbench_binary() -> PathBuf {
    if let Ok(dir) = std::env::var("BERTH_PG_BIN") {
        let p = PathBuf::from(dir).join("pgbench");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("pgbench")
}

fn psql_exec(server: &str, sql: &str) -> Result<()> {
    let mut client = postgres_admin(server)?;
    client.batch_execute(sql)?;
    Ok(())
}

fn postgres_admin(server: &str) -> Result<SyncClient> {
    SyncClient::connect(&format!("{server}/postgres"))
}

/// A tiny blocking wrapper so this module needs no runtime of its own.
struct SyncClient {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl SyncClient {
    fn connect(url: &str) -> Result<SyncClient> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let client = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            Ok::<_, tokio_postgres::Error>(client)
        })?;
        Ok(SyncClient { rt, client })
    }
    fn batch_execute(&mut self, sql: &str) -> Result<()> {
        self.rt.block_on(self.client.batch_execute(sql))?;
        Ok(())
    }
}

/// Initializes a scale-10 pgbench database and runs `clients` clients for
/// `seconds`; returns TPS.
pub fn run(server: &str, clients: usize, seconds: u64) -> Result<f64> {
    std::thread::scope(|s| s.spawn(|| run_blocking(server, clients, seconds)).join().expect("pgbench thread"))
}

fn run_blocking(server: &str, clients: usize, seconds: u64) -> Result<f64> {
    // Two statements: CREATE DATABASE cannot share an implicit transaction.
    psql_exec(server, "DROP DATABASE IF EXISTS bench_pgbench")?;
    psql_exec(server, "CREATE DATABASE bench_pgbench")?;
    let url = format!("{server}/bench_pgbench");
    let init = Command::new(pgbench_binary()).args(["-i", "-q", "-s", "10", &url]).output().context("pgbench -i")?;
    if !init.status.success() {
        bail!("pgbench -i failed: {}", String::from_utf8_lossy(&init.stderr));
    }
    let jobs = clients.clamp(1, 2).to_string();
    let out = Command::new(pgbench_binary())
        .args(["-c", &clients.to_string(), "-j", &jobs, "-T", &seconds.to_string(), "-b", "tpcb-like", &url])
        .output()
        .context("pgbench")?;
    if !out.status.success() {
        bail!("pgbench failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.trim_start_matches("tps = ").split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .with_context(|| format!("no tps in pgbench output: {text}"))?;
    psql_exec(server, "DROP DATABASE IF EXISTS bench_pgbench")?;
    Ok(tps)
}
