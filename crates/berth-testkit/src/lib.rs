//! What Berth's tests share: a real berthd on a fresh test database
//! ([`Server`]), the `berth` CLI run against it ([`berth`], [`berth_json`]),
//! and a real HTTP receiver standing in for outside services ([`receiver`]).
//! A dev-dependency only.
//!
//! The binaries are found beside the test's own target directory: cargo
//! builds a package's binaries before its integration tests, so a test of
//! berthd (or of berth-cli) always finds a fresh one there; a test of another
//! crate needs it built first (`cargo build -p berthd`, as `make test` does).

mod cli;
pub mod receiver;
mod server;

use std::path::PathBuf;

pub use cli::{berth, berth_json};
pub use server::{holds_port, Server};

/// Tokens the noauth mode reads as `user:project` (an admin has no project).
pub const ADMIN: &str = "admin";
/// A member of project p1.
pub const ALICE: &str = "alice:p1";
/// A member of project p2.
pub const BOB: &str = "bob:p2";

/// The target directory this test runs from (for caches such as a venv).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.ancestors().nth(3).expect("target directory").to_path_buf()
}

/// A binary of this workspace, beside the running test's directory of
/// dependencies (`target/debug/deps/..`).
fn workspace_bin(name: &str, package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target directory");
    let bin = dir.join(name);
    assert!(bin.exists(), "{} is missing: build it first (cargo build -p {package})", bin.display());
    bin
}

/// The berthd binary.
pub fn berthd_bin() -> PathBuf {
    workspace_bin("berthd", "berthd")
}

/// The berth CLI binary.
pub fn berth_bin() -> PathBuf {
    workspace_bin("berth", "berth-cli")
}
