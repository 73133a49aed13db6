//! Black-box: the berthd binary on a real database.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;

struct Daemon {
    child: Child,
    base: String,
}

impl Daemon {
    /// Started, not yet answering; `env` beside the test's settings.
    fn spawn(db: &TestDatabase, env: &[(&str, &str)]) -> Daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(berth_testkit::berthd_bin())
            .arg("serve")
            .env("BERTH_DATABASE_URL", &db.url)
            .env("BERTH_LISTEN", format!("127.0.0.1:{port}"))
            .env("BERTH_AUTH", "noauth")
            .env("BERTH_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Daemon { child, base: format!("http://127.0.0.1:{port}") }
    }

    fn start(db: &TestDatabase) -> Daemon {
        let d = Daemon::spawn(db, &[]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if reqwest::blocking::get(format!("{}/healthz", d.base)).is_ok() {
                return d;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("berthd did not come up");
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "berthd ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn berthd(args: &[&str], db: &TestDatabase) -> std::process::Output {
    Command::new(berth_testkit::berthd_bin())
        .args(args)
        .env("BERTH_DATABASE_URL", &db.url)
        .env("BERTH_LOG", "warn")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_version_and_probes_then_stops_on_sigterm() {
    let db = TestDatabase::new().await;
    let status = tokio::task::spawn_blocking(move || {
        let d = Daemon::start(&db);
        let root: serde_json::Value = reqwest::blocking::get(format!("{}/", d.base)).unwrap().json().unwrap();
        assert_eq!(root["name"], "berth");
        assert_eq!(root["apis"]["placement"]["max_version"], "1.39");
        // `/` and `--version` name the same build: the version and the
        // commit (twelve hex digits, or unknown outside a git checkout).
        let (version, commit) = (root["version"].as_str().unwrap(), root["commit"].as_str().unwrap());
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        assert!(
            commit == "unknown" || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
            "{commit}"
        );
        let out = Command::new(berth_testkit::berthd_bin()).arg("--version").output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(said.trim(), format!("berthd {version} (commit {commit})"));
        let health = reqwest::blocking::get(format!("{}/healthz", d.base)).unwrap();
        assert_eq!(health.status(), 200);
        let ready = reqwest::blocking::get(format!("{}/readyz", d.base)).unwrap();
        assert_eq!(ready.status(), 200);
        assert!(ready.headers().contains_key("x-openstack-request-id"));
        d.terminate()
    })
    .await
    .unwrap();
    assert!(status.success(), "berthd exited with {status} after SIGTERM");
}

/// As a systemd `Type=notify` unit sees it: READY=1 once migrated and
/// listening, so /readyz answers at once; STOPPING=1 on SIGTERM.
#[tokio::test(flavor = "multi_thread")]
async fn tells_the_service_manager_when_ready_and_when_stopping() {
    let db = TestDatabase::new().await;
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let receive = || {
            let mut buf = [0u8; 4096];
            let n = socket.recv(&mut buf).expect("no notification from berthd within 60 s");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        };
        let d = Daemon::spawn(&db, &[("NOTIFY_SOCKET", path.to_str().unwrap())]);
        let said = receive();
        assert!(said.lines().any(|l| l == "READY=1"), "{said}");
        assert!(said.contains("STATUS=serving on 127.0.0.1:"), "{said}");
        let ready = reqwest::blocking::get(format!("{}/readyz", d.base)).expect("READY=1 before berthd listens");
        assert_eq!(ready.status(), 200, "READY=1 before berthd is ready");
        let status = d.terminate();
        assert_eq!(receive().trim(), "STOPPING=1");
        assert!(status.success(), "berthd exited with {status} after SIGTERM");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_and_replay_verify_report_through_exit_codes() {
    let db = TestDatabase::new().await;
    let out = berthd(&["migrate"], &db);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = db.store(2);
    let meta = berth_core::EventMeta::default();
    let p = store
        .create_provider(&meta, berth_store::commands::NewProvider { uuid: None, name: "h".into(), parent: None })
        .await
        .unwrap();
    let out = berthd(&["replay", "--verify"], &db);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("projections match the log"));

    // A projection that drifted from the log is found and fails the check.
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.execute("UPDATE providers SET name = 'drifted' WHERE uuid = $1", &[&p]).await.unwrap();
    let out = berthd(&["replay", "--verify"], &db);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("DIFFERENT providers"));
}

#[test]
fn a_missing_config_file_is_a_clear_error() {
    let out = Command::new(berth_testkit::berthd_bin())
        .args(["serve", "--config", "/nonexistent/berth.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

/// A log whose transaction ids are ahead of the server's (a dump restored
/// onto another cluster) would let new events sort before old ones, unseen
/// by any reader holding a cursor: berthd refuses to serve, and names the
/// epoch to raise the server's ids to.
#[tokio::test(flavor = "multi_thread")]
async fn refuses_a_log_written_by_a_cluster_ahead_of_this_one() {
    let db = TestDatabase::new().await;
    let (c, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    // Epoch 3 of a cluster that handed out ids past this one's.
    c.batch_execute(
        "INSERT INTO log_events (txid, stream, version, type, data)
         VALUES ((3 * 4294967296 + 1000)::text::xid8, 'trait:CUSTOM_RESTORED', 1, 'TraitCreated',
                 '{\"name\": \"CUSTOM_RESTORED\"}')",
    )
    .await
    .unwrap();
    let url = db.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(berth_testkit::berthd_bin())
            .arg("serve")
            .env("BERTH_DATABASE_URL", &url)
            .env("BERTH_LISTEN", "127.0.0.1:0")
            .env("BERTH_AUTH", "noauth")
            .env("BERTH_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("berthd served on a log ahead of its server");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("pg_resetwal -e 4 "), "{said}");
}

/// `berthd dev` in a process group of its own, as a shell runs it.
struct Dev {
    child: Child,
    port: u16,
    /// Kept open: berthd prints on, and a closed pipe would stop it.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
    _dir: tempfile::TempDir,
}

impl Dev {
    /// Started and serving; with the URL of its database. The free port
    /// it is given may be taken by another test's daemon first: it then
    /// exits, and starts again on another.
    fn start() -> (Dev, String) {
        for _ in 0..5 {
            if let Some(started) = Dev::try_start() {
                return started;
            }
        }
        panic!("berthd dev found no free port in 5 tries");
    }

    fn try_start() -> Option<(Dev, String)> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let dir = tempfile::Builder::new().prefix("berth-dev-").tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(berth_testkit::berthd_bin())
            .args(["dev", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(dir.path())
            .env("BERTH_LOG", "info")
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut first).unwrap();
        let url = first.split("PostgreSQL: ").nth(1).and_then(|r| r.strip_suffix(")\n")).map(str::to_string);
        let url = url.unwrap_or_else(|| panic!("no database URL in {first:?}"));
        // It says how to point the one-off commands at its database.
        let mut said = first.clone();
        while !said.contains("Stop with Ctrl-C") {
            assert!(stdout.read_line(&mut said).unwrap() > 0, "berthd dev said only {said:?}");
        }
        assert!(said.contains(&format!("BERTH_DATABASE_URL={url} berthd replay --verify")), "{said}");
        let deadline = Instant::now() + Duration::from_secs(90);
        // Served by this daemon, not by one that took the port first.
        while !(berth_testkit::holds_port(child.id(), port)
            && reqwest::blocking::get(format!("http://127.0.0.1:{port}/healthz")).is_ok())
        {
            if child.try_wait().unwrap().is_some() {
                use std::io::Read;
                let mut log = String::new();
                child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
                assert!(log.contains("Address already in use"), "berthd dev exited before serving: {log}");
                return None;
            }
            assert!(Instant::now() < deadline, "berthd dev did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some((Dev { child, port, _stdout: stdout, _dir: dir }, url))
    }

    /// Ctrl-C, as a terminal sends it to the whole process group.
    fn interrupt(&self) {
        // SAFETY: a signal to the process group of our own child.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGINT) };
    }

    /// Its log, once it has exited cleanly, checked for a clean stop:
    /// nothing failed or warned once it began to stop, and its database
    /// stopped after it.
    fn stopped_cleanly(mut self) -> String {
        use std::io::Read;
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "berthd dev on {} ignored Ctrl-C", self.port);
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut log = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
        assert!(status.success(), "{status}: {log}");
        let stopping = log.find("\"shutting down\"").expect("berthd said it was shutting down");
        let stopped = log.find("berthd stopped").expect("berthd said it stopped");
        assert!(!log[stopping..].contains("\"WARN\""), "something failed as berthd stopped: {log}");
        let closed = log.find("the database server is shutting down").unwrap_or(usize::MAX);
        assert!(closed > stopped, "the database stopped before berthd: {log}");
        log
    }
}

/// `berthd dev` stopped by Ctrl-C as a terminal sends it, to the whole
/// process group, at once after it serves: it stops cleanly, and each
/// migration is said once.
#[test]
fn dev_stops_cleanly_on_ctrl_c() {
    let (dev, _) = Dev::start();
    dev.interrupt();
    let log = dev.stopped_cleanly();
    assert!(log.contains("schema migrated"), "{log}");
    assert!(!log.contains("applying migration"), "migrations are said once, by berthd: {log}");
}

/// A manager's sweep under way when Ctrl-C comes (held here by a lock on
/// what it reads) is finished before berthd stops and its database with
/// it, not cut off by the database going.
#[tokio::test(flavor = "multi_thread")]
async fn dev_finishes_the_sweep_under_way_before_it_stops() {
    let (dev, url) = tokio::task::spawn_blocking(Dev::start).await.unwrap();
    let (mut c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    // Watched from a connection of its own: within a transaction,
    // pg_stat_activity keeps the picture of its first read.
    let (watch, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let tx = c.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE host_holds IN ACCESS EXCLUSIVE MODE").await.unwrap();
    // The next sweep comes within the poll interval (5 s) and waits on it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let waiting = watch
            .query_one("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'", &[])
            .await
            .unwrap();
        if waiting.get::<_, i64>("n") > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no sweep came to wait on host_holds");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dev.interrupt();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tx.commit().await.unwrap();
    tokio::task::spawn_blocking(move || dev.stopped_cleanly()).await.unwrap();
}
