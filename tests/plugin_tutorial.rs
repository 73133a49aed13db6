//! `docs/plugin-tutorial.md`, run as written: its `sh` blocks, in order, in
//! one shell in an empty directory, against a fresh database. The files the
//! reader writes (the plugin, the configuration) are in those blocks, so
//! the doc is the whole test's input and cannot drift from what Berth does.
//! Only the port changes (the tutorial's 8778 may be taken).

use std::process::Command;

use berth_store::testing::TestDatabase;
use berth_testkit::{berth_bin, berthd_bin};

const TUTORIAL: &str = include_str!("../docs/plugin-tutorial.md");

fn sh_blocks() -> Vec<&'static str> {
    let mut blocks = Vec::new();
    let mut rest = TUTORIAL;
    while let Some(open) = rest.find("```sh\n") {
        let body = &rest[open + 6..];
        let close = body.find("\n```").expect("a closed block");
        blocks.push(&body[..close + 1]);
        rest = &body[close + 4..];
    }
    blocks
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plugin_tutorial_runs() {
    let blocks = sh_blocks();
    assert_eq!(blocks.len(), 6, "the tutorial's steps: {blocks:?}");
    let db = TestDatabase::new().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    // Every command must succeed; berthd, started in the background, is
    // stopped whatever happens.
    let mut script = String::from("set -euo pipefail\ntrap 'kill $(jobs -p) 2> /dev/null || true' EXIT\n");
    for b in &blocks {
        script.push_str(&b.replace("127.0.0.1:8778", &format!("127.0.0.1:{port}")));
    }
    let bin_dir = berth_bin().parent().unwrap().to_owned();
    assert_eq!(berthd_bin().parent(), Some(bin_dir.as_path()));
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new("timeout");
    cmd.args(["120", "bash", "-c", &script]).current_dir(dir.path()).env("PATH", path);
    cmd.env("BERTH_DATABASE_URL", &db.url).env("BERTH_LOG", "warn");
    for (k, _) in std::env::vars() {
        if k.starts_with("BERTH_") && k != "BERTH_DATABASE_URL" && k != "BERTH_LOG" {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the tutorial failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" 0 failed, 0 skipped"), "berth plugin check passed: {stdout}");
    assert!(
        stdout.contains(r#""answer": {"action": "on_start", "lease": "desk-1", "desks": 2}"#),
        "the start hook fired once, as the tutorial says: {stdout}"
    );
    let log = std::fs::read_to_string(dir.path().join("desk.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "one start, applied once: {log}");
    assert!(stdout.contains("refused"), "amount 11 is refused: {stdout}\n{stderr}");
    assert!(stderr.contains("amount: a whole number from 1 to 10"), "the plugin's reason is shown: {stderr}");
}
