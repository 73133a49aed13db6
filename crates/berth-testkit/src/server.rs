//! A real berthd on a fresh database, for black-box tests.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use berth_store::testing::TestDatabase;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::berthd_bin;

pub struct Server {
    pub url: String,
    pub db: TestDatabase,
    child: Child,
    http: reqwest::Client,
    _config: Option<tempfile::NamedTempFile>,
    /// The daemon's standard error, kept for [`Server::log`].
    log: tempfile::NamedTempFile,
    /// How it was started, for [`Server::restart`].
    bin: std::path::PathBuf,
    listen: String,
    env: Vec<(String, String)>,
    config: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what the daemon said.
        if std::thread::panicking() {
            eprintln!("--- berthd log ---\n{}", self.log());
        }
    }
}

/// Whether process `pid` holds the socket listening on `port` (Linux's
/// `/proc`: the socket's inode among the process's descriptors). A daemon
/// that answers on a free port a test picked may be another test's, which
/// took the port first.
pub fn holds_port(pid: u32, port: u16) -> bool {
    let Some(inode) = listening_inode(port) else {
        return false;
    };
    let socket = format!("socket:[{inode}]");
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok).any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == socket.as_str()))
}

/// The inode of the IPv4 socket listening on `port` on this machine.
fn listening_inode(port: u16) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // local address, state 0A (LISTEN), inode.
        (f.len() > 9 && f[1].ends_with(&local) && f[3] == "0A").then(|| f[9].to_string())
    })
}

/// Ports a daemon tries before a test gives up on starting it.
const PORT_TRIES: usize = 5;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    /// Starts `berthd serve` on a free port against a fresh database, with
    /// its manager off: lease statuses stay as the API left them.
    pub async fn start() -> Server {
        Server::start_with_config(None).await
    }

    /// As [`Server::start`], with a configuration file of this TOML (the
    /// environment still sets the database, address and auth). The manager
    /// is off: lease statuses stay as the API left them.
    pub async fn start_with_config(toml: Option<&str>) -> Server {
        let config = toml.map(|t| {
            let mut f = tempfile::NamedTempFile::new().expect("config file");
            std::io::Write::write_all(&mut f, t.as_bytes()).expect("write config");
            f
        });
        let path = config.as_ref().map(|f| f.path().to_path_buf());
        let db = TestDatabase::new().await;
        Server::spawn(berthd_bin(), db, &[("BERTH_MANAGER__ENABLED", "false")], path.as_deref(), config).await
    }

    /// Starts `berthd serve [--config FILE]` on `db` (which other servers
    /// may share), with extra environment; the manager runs unless the
    /// configuration turns it off.
    pub async fn launch(db: TestDatabase, env: &[(&str, &str)], config: Option<&std::path::Path>) -> Server {
        Server::spawn(berthd_bin(), db, env, config, None).await
    }

    /// As [`Server::launch`], with another berthd binary (an earlier
    /// release, for the upgrade test).
    pub async fn launch_bin(
        bin: &std::path::Path,
        db: TestDatabase,
        env: &[(&str, &str)],
        config: Option<&std::path::Path>,
    ) -> Server {
        Server::spawn(bin.to_path_buf(), db, env, config, None).await
    }

    async fn spawn(
        bin: std::path::PathBuf,
        db: TestDatabase,
        env: &[(&str, &str)],
        config: Option<&std::path::Path>,
        keep: Option<tempfile::NamedTempFile>,
    ) -> Server {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let config = config.map(std::path::Path::to_path_buf);
        let listen = format!("127.0.0.1:{}", free_port());
        let child = Server::command(&bin, &db, &listen, &env, config.as_deref(), &log);
        let (url, http) = (format!("http://{listen}"), reqwest::Client::new());
        let mut server = Server { url, db, child, http, _config: keep, log, bin, listen, env, config };
        // The free port may be taken by another test's daemon before this
        // one binds it: it then exits, and starts again on another.
        for _ in 0..PORT_TRIES {
            if server.wait_ready().await {
                return server;
            }
            server.listen = format!("127.0.0.1:{}", free_port());
            server.url = format!("http://{}", server.listen);
            server.start_again().await;
        }
        panic!("berthd found no free port in {PORT_TRIES} tries:\n{}", server.log());
    }

    /// Starts `berthd serve` with these settings, its standard error
    /// appended to `log`.
    fn command(
        bin: &std::path::Path,
        db: &TestDatabase,
        listen: &str,
        env: &[(String, String)],
        config: Option<&std::path::Path>,
        log: &tempfile::NamedTempFile,
    ) -> Child {
        let mut cmd = Command::new(bin);
        cmd.arg("serve");
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let stderr = std::fs::OpenOptions::new().append(true).open(log.path()).expect("open the log file");
        cmd.env("BERTH_DATABASE_URL", &db.url)
            .env("BERTH_LISTEN", listen)
            .env("BERTH_AUTH", "noauth")
            .env("BERTH_POOL_SIZE", "8")
            .env("BERTH_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start berthd")
    }

    /// Kills the daemon and starts it again on the same address and
    /// database, as a restart after a crash would; returns once it is ready.
    pub async fn restart(&mut self) {
        self.kill();
        self.start_again().await;
    }

    /// Starts the daemon again after [`Server::kill`], on the same address
    /// and database; returns once it is ready.
    pub async fn start_again(&mut self) {
        self.child = Server::command(&self.bin, &self.db, &self.listen, &self.env, self.config.as_deref(), &self.log);
        if !self.wait_ready().await {
            panic!("berthd could not bind {} again:\n{}", self.listen, self.log());
        }
    }

    /// Waits until this daemon answers on its address: true; false when it
    /// exited because another process holds the address. An answer counts
    /// only once this daemon holds the listening socket: a port taken in
    /// between answers as another test's daemon.
    async fn wait_ready(&mut self) -> bool {
        for _ in 0..600 {
            if let Some(status) = self.child.try_wait().expect("look at berthd") {
                if self.log().contains("Address already in use") {
                    return false;
                }
                panic!("berthd exited ({status}) before it served:\n{}", self.log());
            }
            if self.serving() {
                if let Ok(r) = self.http.get(format!("{}/readyz", self.url)).send().await {
                    if r.status().is_success() {
                        return true;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("berthd did not become ready:\n{}", self.log());
    }

    /// Whether this daemon holds the socket listening on its port (Linux's
    /// `/proc`: the socket's inode among the process's descriptors).
    fn serving(&self) -> bool {
        let port = self.listen.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).expect("a port");
        holds_port(self.child.id(), port)
    }

    /// Sends `body` (None: no body; a string: raw) as `token`.
    pub async fn call(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.url)).header("x-auth-token", token);
        match body {
            Some(Value::String(raw)) => req = req.header("content-type", "application/json").body(raw),
            Some(b) => req = req.json(&b),
            None => {}
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A Placement call (`path` under `/placement`) at `microversion`
    /// (`"1.28"`), as `token`; its status and body.
    pub async fn placement(
        &self,
        method: Method,
        path: &str,
        token: &str,
        microversion: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let resp = self
            .http
            .request(method, format!("{}/placement{path}", self.url))
            .header("x-auth-token", token)
            .header("openstack-api-version", format!("placement {microversion}"))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = resp.status();
        (status, serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, token, None).await
    }
    /// `/metrics` as an admin reads it (the policy closes it to anonymous callers).
    pub async fn metrics(&self) -> String {
        let resp = reqwest::Client::new()
            .get(format!("{}/metrics", self.url))
            .header("x-auth-token", "admin")
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "/metrics: {}", resp.status());
        resp.text().await.unwrap()
    }
    pub async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, token, Some(body)).await
    }
    pub async fn put(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, token, Some(body)).await
    }
    pub async fn delete(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, token, None).await
    }

    /// What the daemon has written to its standard error so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Fails if the daemon's log shows a panic.
    pub fn assert_no_panic(&self) {
        let log = self.log();
        assert!(!log.contains("panicked"), "berthd panicked:\n{log}");
    }

    /// The daemon's process id (to read its memory in `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: the daemon dies at once, in the middle of whatever it does.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for the daemon to exit; its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().expect("wait for berthd")
    }

    /// Every entry of the log committed before the call, as an admin reads
    /// them: a read straight after a write may not show it yet while an
    /// older transaction anywhere on the cluster still runs.
    pub async fn log_entries(&self) -> Vec<Value> {
        self.db.settled().await;
        let (st, body) = self.get("/v1/log?limit=10000", crate::ADMIN).await;
        assert_eq!(st, StatusCode::OK, "{body}");
        body["entries"].as_array().expect("entries").clone()
    }

    /// `berthd replay --verify` against this server's database.
    pub fn replay_verify(&self) {
        let out = Command::new(berthd_bin())
            .args(["replay", "--verify"])
            .env("BERTH_DATABASE_URL", &self.db.url)
            .env("BERTH_LOG", "warn")
            .output()
            .expect("run replay");
        assert!(out.status.success(), "replay differs: {}", String::from_utf8_lossy(&out.stdout));
    }
}
