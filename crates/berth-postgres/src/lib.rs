//! A local PostgreSQL that Berth starts itself: for `berthd dev`, for the
//! test runs and for the benchmarks. It finds the server binaries, makes a
//! cluster with initdb on first use, starts it on a free loopback port and
//! stops it cleanly. PostgreSQL refuses to run as root, so when this process
//! is root the server runs as an unprivileged system account.
//!
//! It knows nothing of Berth's schema: a database made here is empty until
//! berth-store migrates it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// The account the server runs as when we are root: the distribution's
/// `postgres` account when it exists, else one we create.
const FALLBACK_ACCOUNT: &str = "berth-postgres";

const INSTALL_HINT: &str = "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH \
     or under /usr/lib/postgresql/*/bin. Install them, e.g. on Debian or Ubuntu: \
     `apt-get install postgresql postgresql-contrib`; on Fedora: `dnf install postgresql-server \
     postgresql-contrib`; on macOS: `brew install postgresql@15`.";

/// Settings for a cluster made for throwaway use (tests, benches): durability
/// traded for speed. The benchmarks compare against pgbench on the same server,
/// so both sides run under the same settings.
pub const THROWAWAY_SETTINGS: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "400"),
    ("shared_buffers", "256MB"),
];

pub struct LocalPostgres {
    bin_dir: PathBuf,
    data_dir: PathBuf,
    port: u16,
    run_as: Option<String>,
    stop_on_drop: bool,
}

impl LocalPostgres {
    /// Where initdb, pg_ctl and postgres live.
    pub fn find_bin_dir() -> Result<PathBuf> {
        if let Ok(dir) = std::env::var("BERTH_PG_BIN") {
            return Ok(PathBuf::from(dir));
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
            let mut versions: Vec<(u32, PathBuf)> = entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    Some((v, e.path().join("bin")))
                })
                .collect();
            versions.sort();
            candidates.extend(versions.into_iter().rev().map(|(_, p)| p));
        }
        // PATH may hold symlinks or wrappers; prefer the real install dir above
        // because pg_ctl must find `postgres` beside it.
        if let Some(path) = std::env::var_os("PATH") {
            candidates.extend(std::env::split_paths(&path));
        }
        candidates
            .into_iter()
            .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file() && d.join("postgres").is_file())
            .ok_or_else(|| anyhow!(INSTALL_HINT))
    }

    /// Starts (making it first if needed) the cluster in `data_dir`.
    /// `settings` are passed to the server on its command line.
    pub fn start(data_dir: &Path, settings: &[(&str, &str)], stop_on_drop: bool) -> Result<LocalPostgres> {
        let bin_dir = Self::find_bin_dir()?;
        let run_as = if is_root() { Some(server_account()?) } else { None };
        std::fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
        let data_dir = data_dir.canonicalize()?;
        if let Some(user) = &run_as {
            chown(&data_dir, user)?;
        }
        let mut pg = LocalPostgres { bin_dir, data_dir, port: 0, run_as, stop_on_drop };
        if !pg.data_dir.join("PG_VERSION").exists() {
            pg.run(
                "initdb",
                &[
                    "-D",
                    &pg.data_dir.to_string_lossy(),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-instructions",
                ],
            )
            .context("initdb")?;
        }
        // A stale postmaster.pid from a killed run would block the start.
        pg.stop_quietly();
        let mut last_err = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut opts = format!("-p {port} -k {} -c listen_addresses=127.0.0.1", pg.data_dir.display());
            for (k, v) in settings {
                opts.push_str(&format!(" -c {k}={v}"));
            }
            let log = pg.data_dir.join("server.log");
            match pg.run(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-t",
                    "60",
                    "-D",
                    &pg.data_dir.to_string_lossy(),
                    "-l",
                    &log.to_string_lossy(),
                    "-o",
                    &opts,
                ],
            ) {
                Ok(()) => {
                    pg.port = port;
                    return Ok(pg);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow!("could not start PostgreSQL")))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `database` on this server, as the `postgres` superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The server's base URL, without a database (as the conformance runner wants it).
    pub fn base_url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}", self.port)
    }

    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// Makes the database `name` on this cluster unless it is there;
    /// answers its URL.
    pub async fn create_database(&self, name: &str) -> Result<String> {
        let (admin, conn) = tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        if admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name]).await?.is_none() {
            admin.batch_execute(&format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\""))).await?;
        }
        Ok(self.url(name))
    }

    pub fn stop(&self) -> Result<()> {
        self.run("pg_ctl", &["stop", "-w", "-m", "fast", "-D", &self.data_dir.to_string_lossy()])
    }

    /// Stops the server at once, as a crash would (`-m immediate`): no
    /// shutdown checkpoint, and a standby gets only what it already had.
    pub fn stop_now(&self) -> Result<()> {
        self.run("pg_ctl", &["stop", "-w", "-m", "immediate", "-D", &self.data_dir.to_string_lossy()])
    }

    /// Stops a server whose data is deleted next (a throwaway cluster) at
    /// once: a shutdown checkpoint would write out what no one reads again.
    pub fn throw_away(mut self) -> Result<()> {
        self.stop_on_drop = false;
        self.stop_now()
    }

    /// Makes `data_dir` (which must not exist yet) a streaming standby of
    /// this server: a base backup with the WAL streamed alongside and
    /// `standby.signal` and `primary_conninfo` written (`pg_basebackup -R`).
    /// [`LocalPostgres::start`] then starts it; its `cluster_name` is the
    /// name `synchronous_standby_names` knows it by.
    pub fn base_backup(&self, data_dir: &Path) -> Result<()> {
        let parent = data_dir.parent().ok_or_else(|| anyhow!("{} has no parent", data_dir.display()))?;
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        if let Some(user) = &self.run_as {
            chown(parent, user)?;
        }
        let port = self.port.to_string();
        self.run(
            "pg_basebackup",
            &[
                "-D",
                &data_dir.to_string_lossy(),
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-X",
                "stream",
                "-c",
                "fast",
                "-R",
            ],
        )
        .context("pg_basebackup")
    }

    /// Promotes this standby to a primary and waits until it takes writes
    /// (what a failover manager does on the standby it elects).
    pub fn promote(&self) -> Result<()> {
        self.run("pg_ctl", &["promote", "-w", "-t", "60", "-D", &self.data_dir.to_string_lossy()])
    }

    fn stop_quietly(&self) {
        if self.data_dir.join("postmaster.pid").exists() {
            let _ = self.run("pg_ctl", &["stop", "-w", "-m", "immediate", "-D", &self.data_dir.to_string_lossy()]);
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let exe = self.bin_dir.join(program);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        // The server must not inherit a cwd it cannot read when run as another user.
        cmd.args(args).current_dir("/");
        let out = cmd.output().with_context(|| format!("running {}", exe.display()))?;
        if !out.status.success() {
            bail!(
                "{program} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        if self.stop_on_drop {
            let _ = self.stop();
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn account_exists(name: &str) -> bool {
    Command::new("id").arg("-u").arg(name).output().map(|o| o.status.success()).unwrap_or(false)
}

fn server_account() -> Result<String> {
    if let Ok(user) = std::env::var("BERTH_PG_USER") {
        return Ok(user);
    }
    for name in ["postgres", FALLBACK_ACCOUNT] {
        if account_exists(name) {
            return Ok(name.to_string());
        }
    }
    let status = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", FALLBACK_ACCOUNT])
        .status()
        .context("useradd")?;
    if !status.success() && !account_exists(FALLBACK_ACCOUNT) {
        bail!("could not create the system account {FALLBACK_ACCOUNT} to run PostgreSQL as");
    }
    Ok(FALLBACK_ACCOUNT.to_string())
}

fn chown(path: &Path, user: &str) -> Result<()> {
    let status = Command::new("chown").arg("-R").arg(user).arg(path).status().context("chown")?;
    if !status.success() {
        bail!("chown {user} {} failed", path.display());
    }
    // The account must be able to reach the directory: open the path above it
    // for traversal (not reading).
    let mut dir = path.parent();
    while let Some(d) = dir {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(d) {
            let mode = meta.permissions().mode();
            if mode & 0o001 == 0 {
                let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o001));
            }
        }
        dir = d.parent();
    }
    Ok(())
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}
