//! `berth events` and `berth log` against a real berthd whose manager fires
//! a lease's events (through the built-in noop driver).

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::{berth, Server};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread")]
async fn events_and_the_log_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("berth.toml");
    std::fs::write(&cfg, "[manager]\npoll_interval_ms = 200\n").unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&cfg)).await;
    let (st, _) =
        s.post("/v1/os-hosts", "admin", json!({"name": "h1", "vcpus": 4, "memory_mb": 4096, "local_gb": 10})).await;
    assert!(st.is_success());
    // A live tail of the log, started before anything happens.
    let mut tail = Command::new(berth_testkit::berth_bin())
        .args(["-f", "json", "log", "tail", "--follow", "--type", "LeaseEventFinished"])
        .env("BERTH_URL", &s.url)
        .env("BERTH_TOKEN", "admin")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let end = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let (st, l) = s
        .post(
            "/v1/leases",
            "alice:p1",
            json!({"name": "cli", "start_date": "now", "end_date": end,
                   "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 64}]}),
        )
        .await;
    assert!(st.is_success(), "{l}");
    let id = l["lease"]["id"].as_str().unwrap().to_string();
    // The live tail shows the three events finishing.
    let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    let mut finished = Vec::new();
    while finished.len() < 3 {
        let line = lines.next().expect("the tail ended").unwrap();
        let entry: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(entry["type"], "LeaseEventFinished");
        finished.push(entry);
    }
    let _ = tail.kill();
    let _ = tail.wait();
    assert!(finished.iter().all(|e| e["stream"] == format!("lease:{id}")));
    let deadline = Instant::now() + Duration::from_secs(10);
    let (_, out, _) = loop {
        let r = berth(&s, "alice:p1", &["-f", "json", "events", "list", "--lease", &id]);
        let events: Value = serde_json::from_str(&r.1).unwrap();
        if events.as_array().unwrap().iter().all(|e| e["status"] == "DONE") {
            break r;
        }
        assert!(Instant::now() < deadline, "{}", r.1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let events: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(events.as_array().unwrap().len(), 3);
    let (ok, table, _) = berth(&s, "alice:p1", &["events", "list", "--status", "done"]);
    assert!(ok && table.contains("end_lease") && table.contains("DONE"), "{table}");
    // Another project sees none.
    let (ok, out, _) = berth(&s, "bob:p2", &["-f", "json", "events", "list"]);
    assert!(ok && out.trim() == "[]", "{out}");
    // A tail without --follow prints each event once and stops.
    let (ok, out, err) = berth(&s, "alice:p1", &["events", "tail", "--lease", &id]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().all(|l| l.contains("DONE") && l.contains(&id)), "{out}");
    // The log, paged to its end from its start; without --after, the last
    // ten. Bad input is an error with its reason.
    let (ok, out, _) = berth(&s, "admin", &["log", "tail", "--lease", &id, "--after", "0-0"]);
    assert!(ok && out.contains("LeaseCreated") && out.contains("LeaseEventClaimed"), "{out}");
    let (ok, last, _) = berth(&s, "admin", &["log", "tail", "--lease", &id]);
    assert!(ok && last.lines().count() == out.lines().count().min(10) && out.ends_with(&last), "{last}");
    let (ok, _, err) = berth(&s, "admin", &["events", "list", "--status", "sometimes"]);
    assert!(!ok && err.contains("400"), "{err}");
    let (ok, _, err) = berth(&s, "alice:p1", &["log", "tail"]);
    assert!(!ok && err.contains("403"), "{err}");
}
