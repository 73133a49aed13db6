//! The `exec` driver: runs a configured program once per call.
//!
//! The program gets the call as one JSON document on stdin (and the action and
//! idempotency key also as `BERTH_ACTION` and `BERTH_IDEMPOTENCY_KEY`), and
//! answers JSON on stdout. Exit 0 is done, exit 2 a permanent failure, any
//! other exit (or death by a signal) a failure worth retrying. The program
//! runs in a process group of its own so that a timeout kills everything it
//! started, not only the first process.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::{config_error, failure_text, parse_answer, Driver, Envelope, ExecConfig};
use crate::plugin::HookError;

/// Exit status meaning "do not retry".
pub const EXIT_PERMANENT: i32 = 2;

/// Output kept from each stream; the rest is read and dropped so the program
/// never blocks on a full pipe.
const MAX_OUTPUT: u64 = 8 << 20;

pub struct ExecDriver {
    config: ExecConfig,
}

impl ExecDriver {
    pub fn new(config: ExecConfig) -> Result<Self, berth_core::Error> {
        if config.program.as_os_str().is_empty() {
            return Err(config_error("exec program must not be empty"));
        }
        if config.timeout_ms == 0 {
            return Err(config_error("exec timeout_ms must be more than 0"));
        }
        Ok(ExecDriver { config })
    }

    fn describe(&self) -> String {
        format!("exec {}", self.config.program.display())
    }
}

async fn read_limited<R: AsyncRead + Unpin>(stream: Option<R>) -> Vec<u8> {
    let mut kept = Vec::new();
    if let Some(mut s) = stream {
        let _ = (&mut s).take(MAX_OUTPUT).read_to_end(&mut kept).await;
        let _ = tokio::io::copy(&mut s, &mut tokio::io::sink()).await;
    }
    kept
}

/// Kills the program's whole process group.
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: killpg has no memory effects; the group id is our child's
        // pid, which the kernel does not reuse while the group has members.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

#[async_trait]
impl Driver for ExecDriver {
    fn kind(&self) -> &'static str {
        "exec"
    }

    async fn call(
        &self,
        action: &str,
        payload: &serde_json::Value,
        idempotency_key: &str,
    ) -> Result<serde_json::Value, HookError> {
        let what = self.describe();
        let envelope = Envelope {
            action: action.to_string(),
            idempotency_key: idempotency_key.to_string(),
            payload: payload.clone(),
        };
        let mut input = serde_json::to_vec(&envelope).map_err(|e| HookError::permanent(format!("encoding: {e}")))?;
        input.push(b'\n');

        let mut cmd = Command::new(&self.config.program);
        cmd.args(&self.config.args)
            .envs(&self.config.env)
            .env("BERTH_ACTION", action)
            .env("BERTH_IDEMPOTENCY_KEY", idempotency_key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &self.config.cwd {
            cmd.current_dir(cwd);
        }
        // Not being able to start the program (missing, not executable, no
        // processes left) is the operator's fault, never the request's: it
        // must not read as a refusal, and it may be mended (a deployment
        // half done) before the attempts run out.
        let mut child = cmd.spawn().map_err(|e| HookError::retryable(format!("cannot start: {e} ({what})")))?;
        let pgid = child.id();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();

        let timeout = Duration::from_millis(self.config.timeout_ms);
        let finished = tokio::time::timeout(timeout, async {
            let write = async move {
                if let Some(mut stdin) = stdin {
                    // A program that exits without reading its input is
                    // judged by its exit status, not by the broken pipe.
                    let _ = stdin.write_all(&input).await;
                    let _ = stdin.shutdown().await;
                }
            };
            let ((), out, err) = tokio::join!(write, read_limited(stdout), read_limited(stderr));
            let status = child.wait().await;
            (out, err, status)
        })
        .await;

        let (out, err, status) = match finished {
            Ok(done) => done,
            Err(_) => {
                kill_group(pgid);
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(HookError::retryable(format!(
                    "no answer within {} ms; killed ({what})",
                    self.config.timeout_ms
                )));
            }
        };
        let status: ExitStatus = status.map_err(|e| HookError::retryable(format!("waiting: {e} ({what})")))?;
        if !err.is_empty() {
            tracing::debug!(driver = "exec", action, idempotency_key, stderr = %String::from_utf8_lossy(&err), "program stderr");
        }
        tracing::debug!(driver = "exec", action, idempotency_key, status = %status, "called");
        match status.code() {
            Some(0) => parse_answer(&out, &what),
            code => {
                let reason =
                    if out.iter().all(u8::is_ascii_whitespace) { failure_text(&err) } else { failure_text(&out) };
                let how = match code {
                    Some(c) => format!("exit {c}"),
                    None => {
                        use std::os::unix::process::ExitStatusExt;
                        format!("killed by signal {}", status.signal().unwrap_or(0))
                    }
                };
                let message = format!("{reason} ({what}: {how})");
                Err(if code == Some(EXIT_PERMANENT) {
                    HookError::permanent(message)
                } else {
                    HookError::retryable(message)
                })
            }
        }
    }
}
