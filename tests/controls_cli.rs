//! `berth manager pause|resume|status`, `berth events retry|cancel|fire`,
//! `berth lease end|recover`, and `berth events tail --follow` over the
//! live stream, against a real berthd whose hooks call a real receiver
//! that is broken, then fixed.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Lines};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::{berth, berth_json, receiver, Server};
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ALICE: &str = "alice:p1";

fn config(dir: &tempfile::TempDir, base: &str) -> std::path::PathBuf {
    let cfg = dir.path().join("berth.toml");
    let text = format!(
        "[manager]\npoll_interval_ms = 200\nretry_min_ms = 50\nretry_max_ms = 100\nmax_attempts = 2\n\n\
         [plugins]\nenabled = [\"physical:host\", \"virtual:instance\", \"virtual:thing\"]\n\
         [plugins.external.\"virtual:thing\"]\ndriver = \"webhook\"\n\
         url = \"{base}/hook?validate=nothing&fail=until_fixed\"\ntimeout_ms = 5000\n"
    );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

async fn lease(s: &Server, name: &str) -> Value {
    let end = (chrono::Utc::now() + chrono::Duration::hours(3)).to_rfc3339();
    let (st, l) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": name, "start_date": "now", "end_date": end,
                   "reservations": [{"resource_type": "virtual:thing"}]}),
        )
        .await;
    assert!(st.is_success(), "{l}");
    l["lease"].clone()
}

fn event_id(lease: &Value, kind: &str) -> String {
    let events = lease["events"].as_array().unwrap();
    events.iter().find(|e| e["event_type"] == kind).unwrap()["id"].as_str().unwrap().to_string()
}

/// Reads tail lines until one passes `want`, up to `secs`.
fn read_until(lines: &mut Lines<BufReader<ChildStdout>>, secs: u64, want: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let line = lines.next().expect("the tail ended").unwrap();
        let e: Value = serde_json::from_str(&line).unwrap();
        seen.push(e.clone());
        if want(&e) {
            return seen;
        }
    }
    panic!("not seen within {secs} s: {seen:?}");
}

async fn wait_status(s: &Server, lease: &str, kind: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = s.get(&format!("/v1/leases/{lease}/events?event_type={kind}"), ADMIN).await;
        if body["events"][0]["status"] == status {
            return;
        }
        assert!(Instant::now() < deadline, "{kind} never {status}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_control_the_manager_from_the_command_line() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    // Paused, the leases made now wait.
    let (ok, out, err) = berth(&s, ADMIN, &["-f", "value", "-c", "paused", "manager", "pause"]);
    assert!(ok && out.trim() == "true", "{out} {err}");
    let (ok, _, err) = berth(&s, ALICE, &["manager", "status"]);
    assert!(!ok && err.contains("403"), "{err}");
    let first = lease(&s, "first").await;
    let second = lease(&s, "second").await;
    let status = berth_json(&s, ADMIN, &["manager", "status"]);
    assert_eq!((status["paused"].as_bool(), status["due"].as_i64()), (Some(true), Some(2)), "{status}");
    assert_eq!(status["changed_by"], "admin (admin)");
    // A live tail of the first lease's events: they stand UNDONE, then change.
    let mut tail = Command::new(berth_testkit::berth_bin())
        .args(["-f", "json", "events", "tail", "--follow", "--lease", "first"])
        .env("BERTH_URL", &s.url)
        .env("BERTH_TOKEN", ALICE)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    let snapshot = read_until(&mut lines, 10, |e| e["event_type"] == "end_lease");
    assert!(snapshot.iter().all(|e| e["status"] == "UNDONE"), "{snapshot:?}");
    let (ok, table, _) = berth(&s, ADMIN, &["manager", "resume"]);
    assert!(ok && table.contains("paused") && table.contains("false"), "{table}");
    // The receiver is broken: the start fails for good, live on the tail.
    let start = event_id(&first, "start_lease");
    let changes = read_until(&mut lines, 20, |e| e["id"] == start.as_str() && e["status"] == "ERROR");
    assert!(changes.iter().any(|e| e["status"] == "IN_PROGRESS"), "{changes:?}");
    wait_status(&s, second["id"].as_str().unwrap(), "start_lease", "ERROR").await;
    // Fixed; the first is retried and runs, the second recovered by hand.
    rx.fix();
    let (ok, _, err) = berth(&s, ALICE, &["events", "retry", &start]);
    assert!(!ok && err.contains("403"), "{err}");
    let retried = berth_json(&s, ADMIN, &["events", "retry", &start]);
    assert_eq!((retried["id"].as_str(), retried["attempts"].as_i64()), (Some(start.as_str()), Some(0)), "{retried}");
    read_until(&mut lines, 20, |e| e["id"] == start.as_str() && e["status"] == "DONE");
    let _ = tail.kill();
    let _ = tail.wait();
    let recovered = berth_json(&s, ADMIN, &["lease", "recover", "second"]);
    assert_eq!(recovered["status"], "ACTIVE", "{recovered}");
    let (ok, _, err) = berth(&s, ADMIN, &["lease", "recover", "second"]);
    assert!(!ok && err.contains("409"), "{err}");
    // Cancel the first's before-end, then end it now: only its end runs.
    let before_end = event_id(&first, "before_end_lease");
    let (ok, out, _) = berth(&s, ADMIN, &["-f", "value", "-c", "status", "events", "cancel", &before_end]);
    assert!(ok && out.trim() == "CANCELLED", "{out}");
    let (ok, _, err) = berth(&s, ADMIN, &["events", "cancel", &before_end]);
    assert!(!ok && err.contains("409"), "{err}");
    let ended = berth_json(&s, ADMIN, &["lease", "end", "first"]);
    assert_eq!(ended["id"], first["id"]);
    wait_status(&s, first["id"].as_str().unwrap(), "end_lease", "DONE").await;
    assert!(rx.calls_of("before_end").is_empty());
    // Fire the second's end: it ends now too.
    let fired = berth_json(&s, ADMIN, &["events", "fire", &event_id(&second, "end_lease")]);
    assert_eq!(fired["event_type"], "end_lease");
    wait_status(&s, second["id"].as_str().unwrap(), "end_lease", "DONE").await;
    let (ok, _, err) = berth(&s, ADMIN, &["events", "fire", "nope"]);
    assert!(!ok && err.contains("404"), "{err}");
    s.replay_verify();
}
