//! `berth plugin check` on the examples (`examples/plugins/`): it passes
//! on the exec and webhook ones and fails, naming the check, on the broken
//! one in each of its ways. No server and no database: none is started.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

fn example(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins").join(path).canonicalize().unwrap()
}

fn check(args: &[&str], env: &[(&str, &std::path::Path)]) -> (Output, String) {
    let mut cmd = Command::new(berth_testkit::berth_bin());
    cmd.args(["plugin", "check"]).args(args).env_remove("BERTH_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out, text)
}

fn passes(out: &Output, text: &str) {
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" 0 failed, 0 skipped"), "every check ran and passed:\n{text}");
}

/// Fails with exit 1, and `check` is one of the failed checks.
fn fails_naming(out: &Output, text: &str, check: &str) {
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with(&format!("FAIL {check}"))), "no FAIL {check}:\n{text}");
}

#[test]
fn the_exec_example_passes() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let script = example("floatingip/floatingip.py");
    let args =
        ["--exec", script.to_str().unwrap(), "--type", "virtual:floatingip", "--reservation", r#"{"amount": 2}"#];
    let (out, text) = check(&args, &[("FLOATINGIP_STATE", &state)]);
    passes(&out, &text);
    for line in
        ["ok   validate refuses an unknown parameter", "ok   on_start repeated with the same key applies nothing twice"]
    {
        assert!(text.contains(line), "{line}:\n{text}");
    }
}

/// The webhook example, killed when the test ends.
struct Service(Child, String);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn segment(secret: Option<&str>) -> Service {
    let mut cmd = Command::new(example("segment/segment.py"));
    cmd.args(["--port", "0"]).stdout(Stdio::piped()).stderr(Stdio::null());
    if let Some(s) = secret {
        cmd.args(["--secret", s]);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line}")).to_string();
    Service(child, url)
}

#[test]
fn the_webhook_example_passes_with_its_secret_and_fails_without() {
    let s = segment(Some("s3cret"));
    let args = ["--url", s.1.as_str(), "--secret", "s3cret", "--type", "virtual:segment"];
    let (out, text) = check(&args, &[]);
    passes(&out, &text);
    // Unsigned calls are refused: the plugin is unusable as configured.
    let (out, text) = check(&["--url", s.1.as_str(), "--type", "virtual:segment"], &[]);
    fails_naming(&out, &text, "validate accepts a good reservation");
    assert!(text.contains("401"), "{text}");
}

fn broken(mode: &str, extra: &[&str]) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let script = example("broken/broken.py");
    let mut args = vec!["--type", "x:broken", "--exec", script.to_str().unwrap(), mode];
    args.extend_from_slice(extra);
    check(&args, &[("BROKEN_STATE", &state)])
}

#[test]
fn a_plugin_with_nothing_wrong_passes() {
    let (out, text) = broken("none", &[]);
    passes(&out, &text);
}

#[test]
fn a_wrong_answer_shape_fails() {
    let (out, text) = broken("shape", &[]);
    fails_naming(&out, &text, "validate answers a resource request: a \"slots\" answer needs \"amount\"");
}

#[test]
fn a_plugin_that_applies_a_key_twice_fails() {
    let (out, text) = broken("not-idempotent", &[]);
    fails_naming(&out, &text, "on_start repeated with the same key answers the same");
    fails_naming(&out, &text, "on_start repeated with the same key applies nothing twice");
}

#[test]
fn a_plugin_that_hangs_fails() {
    let (out, text) = broken("hang", &["--timeout-ms", "500"]);
    fails_naming(&out, &text, "on_start acts: failed (Berth would retry): no answer within 500 ms");
    fails_naming(&out, &text, "every call answers within 500 ms");
}

#[test]
fn a_plugin_that_exits_1_on_a_good_reservation_fails() {
    let (out, text) = broken("exit1", &[]);
    fails_naming(&out, &text, "validate accepts a good reservation");
    fails_naming(&out, &text, "validate refuses an unknown parameter: failed (Berth would retry)");
}

#[test]
fn bad_arguments_are_exit_2_and_need_no_server() {
    let (out, text) = check(&["--type", "x:y"], &[]);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("--exec PROGRAM [ARGS] or --url URL"), "{text}");
    let (out, text) = check(&["--type", "x:y", "--exec", "/nonexistent/plugin"], &[]);
    assert_eq!(out.status.code(), Some(2), "{text}");
    // BERTH_URL (berthd's address) is never taken for the plugin's.
    let mut cmd = Command::new(berth_testkit::berth_bin());
    let out = cmd.args(["plugin", "check", "--type", "x:y"]).env("BERTH_URL", "http://127.0.0.1:9").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_hook_answer_that_is_not_json_fails() {
    let (out, text) = broken("stray-output", &[]);
    fails_naming(&out, &text, "on_start acts: refused (exit 2 or a 4xx): answered success, but not in JSON");
}
