//! Rules of the house, checked over the sources: no import circle between the
//! modules of a crate, no source file over 500 lines but the listed ones, the
//! local clock read only where allowed, berth-api's handlers going through
//! berth-app's operations. Between crates, cargo itself refuses
//! a circle; the length of functions is clippy's `too_many_lines`.

mod handlers;
mod lock_order;
mod module_graph;
mod rows;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use module_graph::{circles, siblings, Crate, ModPath};
use serde_json::Value;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// The workspace's own packages, as `cargo metadata` lists them.
fn packages() -> Vec<Value> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    meta["packages"].as_array().expect("packages").clone()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// Import circles being taken apart, each (crate, the modules in it): an
/// entry is a debt with its reason, and goes once its circle is gone (the
/// test fails on an entry no longer needed).
const CIRCLES_BEING_REMOVED: &[(&str, &[&str])] = &[];

/// Within any module, its child modules (each with its own descendants) do
/// not refer to each other in a circle: a reference from `a::b::c` to
/// `a::d::e` is one from `a::b` to `a::d`.
#[test]
fn no_module_imports_another_in_a_circle() {
    // (crate, modules) -> why
    let mut found: BTreeMap<(String, Vec<String>), String> = BTreeMap::new();
    for package in packages() {
        let name = package["name"].as_str().unwrap().to_string();
        let mut roots = BTreeSet::new();
        for target in package["targets"].as_array().unwrap() {
            let kinds: Vec<&str> = target["kind"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            if kinds.iter().any(|k| matches!(*k, "lib" | "bin" | "proc-macro")) {
                roots.insert(PathBuf::from(target["src_path"].as_str().unwrap()));
            }
        }
        for src in roots {
            let krate = Crate::read(&src);
            let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
            let mut why: BTreeMap<(ModPath, ModPath), String> = BTreeMap::new();
            for r in krate.references() {
                if let Some((a, b)) = siblings(&r.from, &r.to) {
                    edges.entry(a.clone()).or_default().insert(b.clone());
                    why.entry((a, b))
                        .or_insert_with(|| format!("{} names {} ({})", r.from.join("::"), r.path, relative(&r.file)));
                }
            }
            for circle in circles(&edges) {
                let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
                let because: Vec<&String> =
                    why.iter().filter(|((a, b), _)| circle.contains(a) && circle.contains(b)).map(|(_, w)| w).collect();
                let said = format!("{name}: {} in a circle: {because:#?}", names.join(" <-> "));
                found.insert((name.clone(), names), said);
            }
        }
    }
    let known: BTreeSet<(String, Vec<String>)> = CIRCLES_BEING_REMOVED
        .iter()
        .map(|(c, ms)| (c.to_string(), ms.iter().map(|m| m.to_string()).collect()))
        .collect();
    let new: Vec<&String> = found.iter().filter(|(f, _)| !known.contains(*f)).map(|(_, why)| why).collect();
    let gone: Vec<_> = known.iter().filter(|k| !found.contains_key(*k)).collect();
    for why in found.values() {
        eprintln!("{why}");
    }
    assert!(new.is_empty(), "modules import each other in a circle:\n{new:#?}");
    assert!(gone.is_empty(), "these circles are gone: take them off CIRCLES_BEING_REMOVED: {gone:?}");
}

/// The check itself: a circle made through a parent's re-export and `super`
/// paths is found; a child using its parent's items, and test modules, are not
/// circles.
#[test]
fn the_circle_check_sees_through_re_exports() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod commands;\nmod queries;\npub struct Code;\n");
    write("commands/mod.rs", "mod claim;\nmod draw;\npub use claim::*;\npub fn shared() {}\n");
    write("commands/claim.rs", "use super::shared;\npub struct Claim;\npub fn f() { super::draw::g() }\n");
    write("commands/draw.rs", "use crate::commands::Claim;\npub fn g() { let _ = crate::Code; }\n");
    write("queries.rs", "pub fn q() {}\n#[cfg(test)]\nmod tests { use crate::commands::Claim; }\n");
    let krate = Crate::read(&dir.path().join("lib.rs"));
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for r in krate.references() {
        if let Some((a, b)) = siblings(&r.from, &r.to) {
            edges.entry(a).or_default().insert(b);
        }
    }
    let path = |s: &str| s.split("::").map(String::from).collect::<ModPath>();
    assert_eq!(circles(&edges), vec![vec![path("commands::claim"), path("commands::draw")]], "{edges:?}");
}

/// The most lines a source file has.
const MAX_LINES: usize = 500;

/// Source files allowed more than [`MAX_LINES`], each with its reason
/// (generated or table-like files; none today).
const LONG_FILES: &[(&str, &str)] = &[];

/// Files over [`MAX_LINES`] being split by idea: a debt, as
/// [`CIRCLES_BEING_REMOVED`]; remove an entry once its file is split.
const LONG_FILES_BEING_SPLIT: &[&str] = &[];

/// Every `.rs` file of every package (sources, tests, benchmarks, examples).
#[test]
fn no_source_file_is_over_500_lines() {
    let mut files = Vec::new();
    for package in packages() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
        rust_files(manifest.parent().unwrap(), &mut files);
    }
    let allowed: HashSet<&str> =
        LONG_FILES.iter().map(|(f, _)| *f).chain(LONG_FILES_BEING_SPLIT.iter().copied()).collect();
    let mut long = BTreeMap::new();
    for f in &files {
        let lines = std::fs::read_to_string(f).unwrap().lines().count();
        if lines > MAX_LINES {
            long.insert(relative(f), lines);
        }
    }
    for (f, n) in &long {
        eprintln!("{f}: {n} lines");
    }
    let over: Vec<_> = long.iter().filter(|(f, _)| !allowed.contains(f.as_str())).collect();
    assert!(over.is_empty(), "over {MAX_LINES} lines, split by idea: {over:?}");
    let short: Vec<_> = allowed.iter().filter(|f| !long.contains_key(**f)).collect();
    assert!(short.is_empty(), "no longer over {MAX_LINES} lines: take them off the lists: {short:?}");
}

/// Files allowed to read the local wall clock, and why: measuring the skew,
/// HTTP `last-modified`, a serialization unit test, the benchmarks'
/// stopwatch, how long to cache a Keystone answer or keep Berth's own
/// Keystone token (Keystone decides each validation itself), and the tests'
/// stand-in for an outside service, which keeps its own time.
const LOCAL_CLOCK_READERS: &[&str] = &[
    "crates/berth-store/src/clock.rs",
    "crates/berth-api/src/auth/keystone.rs",
    "crates/berth-api/src/placement/http.rs",
    "crates/berth-core/src/event.rs",
    "crates/berth-bench/src/",
    "crates/berth-testkit/src/receiver.rs",
];

/// The compiler keeps the rule (clippy's `disallowed-methods`, run by `make
/// lint`); this keeps the rule itself, and the few exceptions, from drifting.
#[test]
fn the_local_clock_is_read_only_where_allowed() {
    let root = root();
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).expect("clippy.toml");
    let config: toml::Value = toml::from_str(&clippy).unwrap();
    let disallowed: HashSet<&str> = config["disallowed-methods"]
        .as_array()
        .expect("disallowed-methods")
        .iter()
        .map(|m| m.get("path").and_then(|p| p.as_str()).or(m.as_str()).unwrap())
        .collect();
    for method in ["chrono::Utc::now", "chrono::Local::now", "std::time::SystemTime::now"] {
        assert!(disallowed.contains(method), "clippy.toml no longer disallows {method}");
    }
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut readers = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if ["Utc::now", "SystemTime::now", "Local::now"].iter().any(|m| text.contains(m)) {
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            assert!(
                LOCAL_CLOCK_READERS.iter().any(|allowed| rel.starts_with(allowed)),
                "{rel} reads the local clock: decide on the database's (berth_store::clock) instead"
            );
            if !rel.starts_with("crates/berth-bench/") {
                let allow = text.lines().find(|l| l.contains("#[allow(clippy::disallowed_methods)]"));
                assert!(allow.is_some_and(|l| l.contains("//")), "{rel}: the allowance must say why");
            }
            readers.push(rel);
        }
    }
    assert!(readers.iter().any(|r| r.ends_with("berth-store/src/clock.rs")), "the scan found nothing: {readers:?}");
}

/// berth-api's handlers are parse → operation → render: berth-api does
/// not depend on the crates behind berth-app's operations (so no handler
/// can call the store, a plugin or the policy service), its state holds
/// the operations and not their parts, and no handler is over 30 lines.
#[test]
fn handlers_are_parse_operation_render() {
    handlers::the_check_sees();
    let api = packages().into_iter().find(|p| p["name"] == "berth-api").expect("berth-api");
    let reached: Vec<String> = api["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null() && handlers::BEHIND_THE_OPERATIONS.contains(&d["name"].as_str().unwrap()))
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert!(reached.is_empty(), "berth-api depends on {reached:?}: call a berth-app operation instead");
    let (seen, wrong) = handlers::check(&root());
    assert!(seen >= 80, "the scan found only {seen} handlers");
    assert!(wrong.is_empty(), "handlers that do more than parse, call an operation and render:\n{wrong:#?}");
}

/// The lease policy is asked in one place, `berth_app::policy`: no other
/// crate's sources ask the rules or the external service
/// (`check_create`, `check_update`) or make the lease they are told of
/// (`LeaseValues`); berth-core keeps the rules' arithmetic.
#[test]
fn the_lease_policy_is_asked_only_in_berth_app() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() && !src.starts_with(root().join("crates/berth-app")) {
            rust_files(&src, &mut files);
        }
    }
    let asks = [".check_create(", ".check_update(", "LeaseValues::of_record", "LeaseValues {"];
    let named: Vec<String> = files
        .iter()
        .filter(|f| f.components().all(|c| c.as_os_str() != "berth-core"))
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            asks.iter().any(|a| text.contains(a))
        })
        .map(|f| relative(f))
        .collect();
    assert!(files.len() > 100, "the scan found too little: {}", files.len());
    assert!(named.is_empty(), "the lease policy is berth_app::policy's to ask: {named:?}");
}
