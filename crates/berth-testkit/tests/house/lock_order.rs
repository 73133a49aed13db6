//! One lock order: only berth-store's `lock` module writes row locks
//! (`FOR UPDATE`, `FOR SHARE`), so the order it documents is the order
//! every command takes. The manager's claim of due lease events is the one
//! exception, on purpose: it skips locked rows (`SKIP LOCKED`) instead of
//! waiting in the order.

use std::path::PathBuf;

use super::{relative, root, rust_files};

/// The module that owns the lock order.
const LOCK_MODULE: &str = "crates/berth-store/src/lock.rs";

#[test]
fn only_the_lock_module_writes_row_locks() {
    let mut files: Vec<PathBuf> = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let name = relative(f);
        // Sources only: tests lock rows to set up races on purpose.
        if name == LOCK_MODULE || !name.contains("/src/") {
            continue;
        }
        for (n, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let locks = code.contains("FOR UPDATE") || code.contains("FOR SHARE");
            if locks && !code.contains("SKIP LOCKED") {
                found.push(format!("{name}:{}: {}", n + 1, code));
            }
        }
    }
    assert!(found.is_empty(), "row locks outside {LOCK_MODULE}; take them through it:\n{}", found.join("\n"));
}
