//! Headless Chromium through Playwright for Python: finding both, and one
//! run of `drive.py` that the test talks to line by line.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

pub struct Browser {
    chromium: PathBuf,
    python: PathBuf,
}

/// Where the screenshots go: `target/ui-screenshots/`.
pub fn screenshots() -> PathBuf {
    let dir = berth_testkit::target_dir().join("ui-screenshots");
    std::fs::create_dir_all(&dir).expect("make target/ui-screenshots");
    dir
}

fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())
}

fn skip(why: &str) {
    eprintln!(
        "\n{bar}\n*** SKIPPED: the console's browser test: {why}.\n*** Run `make deps` (scripts/ensure-chromium.sh) to install Chromium and Playwright.\n{bar}\n",
        bar = "*".repeat(78)
    );
}

impl Browser {
    /// Chromium (`BERTH_CHROMIUM`, else `chromium` on the path) and the
    /// venv with Playwright; `None`, said loudly, when either is missing.
    pub fn find() -> Option<Browser> {
        let chromium = std::env::var_os("BERTH_CHROMIUM")
            .map(PathBuf::from)
            .or_else(|| on_path("chromium"))
            .or_else(|| on_path("chromium-browser"));
        let Some(chromium) = chromium else {
            skip("no chromium on the path (nor BERTH_CHROMIUM)");
            return None;
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::process::Command::new("sh")
            .arg(root.join("scripts/console-venv.sh"))
            .env("CARGO_TARGET_DIR", berth_testkit::target_dir())
            .output()
            .expect("run scripts/console-venv.sh");
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr);
            skip(&format!("Playwright for Python could not be installed: {text}"));
            return None;
        }
        let python = berth_testkit::target_dir().join("console-venv/bin/python");
        Some(Browser { chromium, python })
    }

    /// Starts `drive.py SCENARIO` against `url` with `args`.
    pub fn drive(&self, url: &str, scenario: &str, args: &Value) -> Drive {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("console/drive.py");
        let mut child = tokio::process::Command::new(&self.python)
            .arg(script)
            .arg(&self.chromium)
            .arg(url)
            .arg(screenshots())
            .arg(scenario)
            .arg(args.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start drive.py");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Drive { child, stdin, lines }
    }
}

/// One run of `drive.py`.
pub struct Drive {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

pub enum Said {
    /// The script waits for the test to do this, then to answer.
    Ask(Value),
    /// The scenario's outcome (and the page's script errors).
    Done { result: Value, errors: Vec<String> },
}

impl Drive {
    /// The script's next line; a script that ends without a result fails the test.
    pub async fn next(&mut self) -> Said {
        loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(120), self.lines.next_line())
                .await
                .expect("drive.py said nothing for 2 minutes")
                .expect("read drive.py");
            let Some(line) = line else {
                let status = self.child.wait().await.expect("drive.py");
                panic!("drive.py ended ({status}) without a result: see its output above");
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                println!("drive.py: {line}");
                continue;
            };
            if let Some(a) = v.get("ask") {
                return Said::Ask(a.clone());
            }
            if let Some(r) = v.get("result") {
                let errors = v["errors"].as_array().into_iter().flatten().map(|e| e.to_string()).collect();
                return Said::Done { result: r.clone(), errors };
            }
        }
    }

    /// Answers the script's ask.
    pub async fn answer(&mut self, v: &Value) {
        self.stdin.write_all(format!("{v}\n").as_bytes()).await.expect("answer drive.py");
        self.stdin.flush().await.unwrap();
    }

    /// Runs to the result, with no asks expected.
    pub async fn result(mut self) -> Value {
        match self.next().await {
            Said::Done { result, errors } => {
                assert!(errors.is_empty(), "the page's script failed: {errors:?}");
                result
            }
            Said::Ask(a) => panic!("drive.py asked {a} unexpectedly"),
        }
    }
}
