//! The commit berthd is built from, for `berthd --version` and `/`:
//! `BERTH_COMMIT`, twelve hex digits, or `unknown` outside a git checkout
//! (a source tarball). Rebuilt when HEAD moves. A build with no `.git` (the
//! container's) may name it in the environment: `BERTH_COMMIT=...`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let given =
        std::env::var("BERTH_COMMIT").ok().filter(|c| c.len() == 12 && c.bytes().all(|b| b.is_ascii_hexdigit()));
    let commit = given.or_else(|| git(&["rev-parse", "--short=12", "HEAD"])).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BERTH_COMMIT={commit}");
    // HEAD itself, the branch it names and packed refs: a new commit
    // changes one of them.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/packed-refs");
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]).unwrap_or(dir);
            println!("cargo:rerun-if-changed={common}/{branch}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BERTH_COMMIT");
}
