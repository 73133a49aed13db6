//! The real python-blazarclient library, from PyPI in a venv under the
//! target directory, driven against berthd's /v1 (crates/berthd/tests/blazarclient/drive.py).
//! Skips, loudly, only when the package index cannot be reached.

use std::path::Path;
use std::process::Command;

use berth_testkit::Server;

/// pip failed for want of a network, not for anything of ours.
fn unreachable(output: &str) -> bool {
    [
        "NewConnectionError",
        "Max retries exceeded",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "Name or service not known",
        "No matching distribution found",
        "ConnectTimeoutError",
        "ProxyError",
    ]
    .iter()
    .any(|s| output.contains(s))
}

/// A venv with python-blazarclient installed; `None` when the index is out of reach.
fn venv() -> Option<std::path::PathBuf> {
    let dir = berth_testkit::target_dir().join("blazarclient-venv");
    let python = dir.join("bin/python");
    let importable = |p: &Path| {
        Command::new(p).args(["-c", "import blazarclient.client"]).status().map(|s| s.success()).unwrap_or(false)
    };
    if python.exists() && importable(&python) {
        return Some(python);
    }
    let interpreter = std::env::var("BERTH_PYTHON").unwrap_or_else(|_| "python3".into());
    let made =
        Command::new(&interpreter).args(["-m", "venv", "--clear"]).arg(&dir).status().expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv {} failed", dir.display());
    let out = Command::new(dir.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "python-blazarclient"])
        .output()
        .expect("run pip");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        if unreachable(&text) {
            eprintln!("\n*** SKIPPED python-blazarclient test: the package index is unreachable ***\n{text}");
            return None;
        }
        panic!("pip install python-blazarclient failed:\n{text}");
    }
    assert!(importable(&python), "python-blazarclient installed but does not import");
    Some(python)
}

#[tokio::test(flavor = "multi_thread")]
async fn python_blazarclient_drives_leases_and_hosts() {
    let Some(python) = tokio::task::spawn_blocking(venv).await.unwrap() else {
        return;
    };
    let server = Server::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/blazarclient/drive.py");
    let url = format!("{}/v1", server.url);
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python).arg(script).env("BLAZAR_URL", url).env("BLAZAR_TOKEN", "admin").output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "python-blazarclient run failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("python-blazarclient: all good"));
    server.replay_verify();
}
