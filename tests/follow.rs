//! `berth log tail --follow` outlives a restart of the server: it backs off
//! while the server is down, reconnects, and resumes from its cursor (no
//! entry twice, none lost).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use berth_testkit::{Server, ADMIN};
use serde_json::{json, Value};

async fn enrol(s: &Server, name: &str) {
    let (st, body) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": name, "vcpus": 4, "memory_mb": 4096, "local_gb": 10})).await;
    assert!(st.is_success(), "{body}");
}

/// Entries from the tail until one mentions `name`.
fn until(lines: &mpsc::Receiver<Value>, name: &str, seen: &mut Vec<Value>) {
    loop {
        let e = lines.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no entry for {name}: {seen:?}"));
        let found = e.to_string().contains(name);
        seen.push(e);
        if found {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn follow_reconnects_after_a_restart_and_resumes_from_its_cursor() {
    let mut s = Server::start().await;
    let mut tail = Command::new(berth_testkit::berth_bin())
        .args(["-f", "json", "log", "tail", "--follow"])
        .env("BERTH_URL", &s.url)
        .env("BERTH_TOKEN", ADMIN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).expect("a JSON line"));
        }
    });
    let mut seen = Vec::new();
    enrol(&s, "before-restart").await;
    until(&lines, "before-restart", &mut seen);

    // Down long enough that the tail finds nobody there and backs off.
    s.kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.start_again().await;
    // Written while the tail is reconnecting, and after.
    enrol(&s, "after-restart").await;
    until(&lines, "after-restart", &mut seen);
    enrol(&s, "later").await;
    until(&lines, "later", &mut seen);
    let _ = tail.kill();
    let out = tail.wait_with_output().unwrap();

    let positions: Vec<String> = seen.iter().map(|e| e["position"].to_string()).collect();
    let mut unique = positions.clone();
    unique.dedup();
    assert_eq!(positions, unique, "no entry twice across the reconnect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reconnecting"), "the tail says it reconnects: {stderr}");
    s.assert_no_panic();
}
