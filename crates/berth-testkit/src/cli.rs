//! The `berth` CLI run against a [`Server`].

use std::process::Command;

use serde_json::Value;

use crate::{berth_bin, Server};

/// Runs the `berth` CLI against `server` with `token`: (success, stdout, stderr).
pub fn berth(server: &Server, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(berth_bin())
        .args(args)
        .env("BERTH_URL", &server.url)
        .env("BERTH_TOKEN", token)
        .output()
        .expect("run berth");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Runs `berth -f json ARGS`, which must succeed, and parses its output.
pub fn berth_json(server: &Server, token: &str, args: &[&str]) -> Value {
    let mut all = vec!["-f", "json"];
    all.extend_from_slice(args);
    let (ok, out, err) = berth(server, token, &all);
    assert!(ok, "berth {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("berth {args:?}: not JSON ({e}): {out}"))
}
