//! The exec driver running real scripts written to a temporary directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use berth_plugins::driver::{Driver, ExecConfig, ExecDriver};
use berth_plugins::DriverConfig;
use serde_json::json;

/// Scripts run through `/bin/sh`, so none is executed straight after being
/// written (which can fail with "text file busy" when another thread forks).
fn script(dir: &Path, name: &str, body: &str) -> ExecConfig {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    ExecConfig {
        program: PathBuf::from("/bin/sh"),
        args: vec![path.display().to_string()],
        env: BTreeMap::new(),
        cwd: None,
        timeout_ms: 10_000,
    }
}

fn driver(c: ExecConfig) -> ExecDriver {
    ExecDriver::new(c).unwrap()
}

#[tokio::test]
async fn exit_0_answers_stdout_and_the_program_gets_the_call_on_stdin_and_in_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = script(
        dir.path(),
        "echo.sh",
        r#"printf '{"env":{"action":"%s","key":"%s","site":"%s","arg":"%s","cwd":"%s"},"stdin":' \
             "$BERTH_ACTION" "$BERTH_IDEMPOTENCY_KEY" "$SITE" "$1" "$(pwd)"
           cat
           printf '}'
           echo "some log line" >&2"#,
    );
    c.args.push("extra".into());
    c.env.insert("SITE".into(), "north".into());
    c.cwd = Some(dir.path().to_path_buf());
    let payload = json!({"lease": {"id": "l-1"}, "unicode": "ü \" \\ \n"});
    let out = driver(c).call("wake_up", &payload, "event-1").await.unwrap();
    assert_eq!(
        out["env"],
        json!({"action": "wake_up", "key": "event-1", "site": "north", "arg": "extra",
               "cwd": dir.path().canonicalize().unwrap().display().to_string()})
    );
    assert_eq!(out["stdin"], json!({"action": "wake_up", "idempotency_key": "event-1", "payload": payload}));
}

#[tokio::test]
async fn exit_0_with_nothing_on_stdout_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let out = driver(script(dir.path(), "quiet.sh", "exit 0")).call("a", &json!({}), "k").await.unwrap();
    assert_eq!(out, serde_json::Value::Null);
}

#[tokio::test]
async fn exit_2_is_permanent_with_the_programs_reason() {
    let dir = tempfile::tempdir().unwrap();
    let c = script(dir.path(), "refuse.sh", r#"echo '{"error":"instance i-3 does not exist"}'; exit 2"#);
    let err = driver(c).call("delete", &json!({}), "k").await.unwrap_err();
    assert!(err.permanent, "{err:?}");
    assert!(err.message.starts_with("instance i-3 does not exist"), "{err:?}");
    assert!(err.message.contains("exit 2"), "{err:?}");
}

#[tokio::test]
async fn other_exits_are_retryable_with_stderr_as_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    for code in [1, 3, 75] {
        let c = script(dir.path(), "flaky.sh", &format!("echo 'compute unreachable' >&2; exit {code}"));
        let err = driver(c).call("delete", &json!({}), "k").await.unwrap_err();
        assert!(!err.permanent, "{code}: {err:?}");
        assert!(err.message.starts_with("compute unreachable"), "{err:?}");
        assert!(err.message.contains(&format!("exit {code}")), "{err:?}");
    }
}

#[tokio::test]
async fn a_program_killed_by_a_signal_is_retryable() {
    let dir = tempfile::tempdir().unwrap();
    let err = driver(script(dir.path(), "die.sh", "kill -9 $$")).call("a", &json!({}), "k").await.unwrap_err();
    assert!(!err.permanent, "{err:?}");
    assert!(err.message.contains("signal 9"), "{err:?}");
}

#[tokio::test]
async fn exit_0_with_output_that_is_not_json_is_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let err = driver(script(dir.path(), "chatty.sh", "echo 'done!'")).call("a", &json!({}), "k").await.unwrap_err();
    assert!(err.permanent, "{err:?}");
    assert!(err.message.contains("not in JSON"), "{err:?}");
}

/// Processes of a process group that are still running (zombies, waiting
/// for a parent to reap them, are already dead).
fn live_members(pgid: i32) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp ...; comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            n += 1;
        }
    }
    n
}

#[tokio::test]
async fn a_timeout_kills_the_program_and_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // The shell starts a child (sleep) that holds stdout open: killing only
    // the shell would leave the call waiting for the pipe to close.
    let mut c = script(dir.path(), "hang.sh", &format!("echo $$ > {}; sleep 600; echo '{{}}'", pidfile.display()));
    c.timeout_ms = 300;
    let err = driver(c).call("a", &json!({}), "k").await.unwrap_err();
    assert!(!err.permanent, "{err:?}");
    assert!(err.message.contains("no answer within 300 ms; killed"), "{err:?}");
    let pgid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    // Killed at once; an orphaned sleep is reaped by init on its own time.
    let mut left = live_members(pgid);
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        left = live_members(pgid);
    }
    assert_eq!(left, 0, "processes of group {pgid} still running");
}

#[tokio::test]
async fn a_program_that_does_not_read_its_input_is_judged_by_its_exit() {
    let dir = tempfile::tempdir().unwrap();
    let c = script(dir.path(), "deaf.sh", r#"echo '{"ok":true}'"#);
    // Far larger than a pipe buffer: writing it fails once the program exits.
    let big = json!({"blob": "x".repeat(4 << 20)});
    assert_eq!(driver(c).call("a", &big, "k").await.unwrap(), json!({"ok": true}));
}

#[tokio::test]
async fn a_missing_program_is_a_retryable_failure() {
    let d = DriverConfig::Exec(ExecConfig {
        program: "/nonexistent/berth-plugin".into(),
        args: vec![],
        env: BTreeMap::new(),
        cwd: None,
        timeout_ms: 1_000,
    })
    .build()
    .unwrap();
    let err = d.call("a", &json!({}), "k").await.unwrap_err();
    assert!(!err.permanent, "the operator's fault, not a refusal: {err:?}");
    assert!(err.message.contains("cannot start"), "{err:?}");
}
