//! A real `berthd serve` process for the scenarios that measure it from the
//! outside (an HTTP load generator, its resident memory). The binary is the
//! one beside berth-bench (`make bench` builds both in release).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

pub struct Daemon {
    /// Where it listens, e.g. `http://127.0.0.1:PORT`.
    pub url: String,
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// `berthd serve` on a free loopback port against `database_url`, noauth,
    /// manager off (nothing here is a lease), with `pool_size` connections.
    pub async fn start(database_url: &str, pool_size: usize) -> Result<Daemon> {
        Daemon::start_with(database_url, pool_size, &[]).await
    }

    /// As [`Daemon::start`], with more settings (`BERTH_*` variables).
    pub async fn start_with(database_url: &str, pool_size: usize, env: &[(&str, &str)]) -> Result<Daemon> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new(berthd()?)
            .arg("serve")
            .env("BERTH_DATABASE_URL", database_url)
            .env("BERTH_LISTEN", &listen)
            .env("BERTH_AUTH", "noauth")
            .env("BERTH_POOL_SIZE", pool_size.to_string())
            .env("BERTH_MANAGER__ENABLED", "false")
            .env("BERTH_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .envs(env.iter().copied())
            .spawn()
            .context("start berthd")?;
        let daemon = Daemon { url: format!("http://{listen}"), child };
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(r) = http.get(format!("{}/readyz", daemon.url)).send().await {
                if r.status().is_success() {
                    return Ok(daemon);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("berthd did not become ready on {listen}")
    }

    /// Resident memory now and its peak since start, in MB (Linux `/proc`).
    pub fn memory_mb(&self) -> Result<(f64, f64)> {
        memory_mb(self.child.id())
    }
}

/// Resident memory of the bench process itself now and at its peak, in MB:
/// the in-process scenarios run the store and router inside it.
pub fn own_memory_mb() -> Result<(f64, f64)> {
    memory_mb(std::process::id())
}

pub(crate) fn memory_mb(pid: u32) -> Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("read /proc status")?;
    let kb = |key: &str| -> Result<f64> {
        let line = status.lines().find(|l| l.starts_with(key)).with_context(|| format!("{key} missing"))?;
        let n: f64 = line.split_whitespace().nth(1).context("no number")?.parse()?;
        Ok(n / 1024.0)
    };
    Ok((kb("VmRSS:")?, kb("VmHWM:")?))
}

/// The berthd built beside this binary.
fn berthd() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("berthd");
    if !bin.exists() {
        bail!("{} is missing: build it (cargo build --release -p berthd)", bin.display());
    }
    Ok(bin)
}
