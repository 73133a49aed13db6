//! The CLI's output as the openstack client's: `-f table|json|yaml|value|csv`,
//! `-c COLUMN`, tables fitted to the width, completions, names for ids and
//! python-blazarclient's option names.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use std::process::Command;

use berth_testkit::{berth, berth_bin, berth_json as json, Server, ADMIN, ALICE, BOB};

fn future(days: i64, hour: u32) -> String {
    let d = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    format!("{d} {hour:02}:00")
}

fn ok(s: &Server, token: &str, args: &[&str]) -> String {
    let (ok, out, err) = berth(s, token, args);
    assert!(ok, "berth {args:?} failed: {err}");
    out
}

/// Two hosts, and two of Alice's leases: `first` (made with blazarclient's
/// `--start-date`/`--end-date`/`--physical-reservation`) and `second`.
fn leases(s: &Server) -> (String, String) {
    for h in ["out-1", "out-2"] {
        ok(s, ADMIN, &["host", "create", h, "--vcpus", "4", "--memory-mb", "4096", "--local-gb", "10"]);
    }
    let res = "resource_type=physical:host,min=1,max=1";
    let first = json(
        s,
        ALICE,
        &[
            "lease",
            "create",
            "first",
            "--start-date",
            &future(3, 10),
            "--end-date",
            &future(3, 12),
            "--physical-reservation",
            "min=1,max=1",
        ],
    );
    assert_eq!(first["start_date"].as_str().map(|d| &d[11..16]), Some("10:00"), "{first}");
    let second = json(
        s,
        ALICE,
        &["lease", "create", "second", "--start", &future(4, 10), "--end", &future(4, 12), "--reservation", res],
    );
    (first["id"].as_str().unwrap().to_owned(), second["id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn every_format_and_picked_columns() {
    let s = Server::start().await;
    let (first, second) = leases(&s);

    let value = ok(&s, ALICE, &["lease", "list", "-f", "value", "-c", "name", "-c", "status"]);
    let mut lines: Vec<&str> = value.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["first PENDING", "second PENDING"], "{value}");

    let csv = ok(&s, ALICE, &["lease", "list", "-f", "csv", "-c", "id", "-c", "name"]);
    let mut lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.remove(0), "id,name", "{csv}");
    lines.sort_unstable();
    let mut want = [format!("{first},first"), format!("{second},second")];
    want.sort_unstable();
    assert_eq!(lines, want, "{csv}");

    let yaml: serde_json::Value =
        serde_norway::from_str(&ok(&s, ALICE, &["lease", "show", "first", "-f", "yaml"])).unwrap();
    assert_eq!(yaml["id"], first.as_str());
    assert!(yaml["reservations"].is_array(), "yaml shows the whole lease: {yaml}");

    let picked = json(&s, ALICE, &["lease", "show", "second", "-c", "name", "-c", "status"]);
    assert_eq!(picked, serde_json::json!({"name": "second", "status": "PENDING"}));
    assert_eq!(ok(&s, ALICE, &["lease", "show", "first", "-f", "value", "-c", "id"]).trim(), first);

    // Times to the second with their zone; the document keeps the API's form.
    let start = ok(&s, ALICE, &["lease", "show", "first", "-f", "value", "-c", "start_date"]);
    let api = json(&s, ALICE, &["lease", "show", "first"])["start_date"].as_str().unwrap().to_string();
    assert_eq!(start.trim(), format!("{}Z", &api[..19]), "{start} against {api}");

    // A column that is not there is refused, naming those there are.
    let (done, _, err) = berth(&s, ALICE, &["lease", "list", "-c", "colour"]);
    assert!(!done && err.contains("\"colour\"") && err.contains("status"), "{err}");

    // Quotas print through the same formats.
    let csv = ok(&s, ADMIN, &["quota", "set", "--project", "p1", "leases=10", "-f", "csv"]);
    assert!(csv.lines().next() == Some("Resource,Limit,Source") && csv.contains("leases,10,project"), "{csv}");
}

#[tokio::test]
async fn tables_fit_the_width() {
    let s = Server::start().await;
    leases(&s);
    for width in [60, 100] {
        let out = Command::new(berth_bin())
            .args(["lease", "list", "-c", "id", "-c", "name", "-c", "start_date", "-c", "end_date", "-c", "status"])
            .env("BERTH_URL", &s.url)
            .env("BERTH_TOKEN", ALICE)
            .env("COLUMNS", width.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let table = String::from_utf8(out.stdout).unwrap();
        assert!(table.contains("second"), "{table}");
        for line in table.lines() {
            assert!(line.chars().count() <= width, "wider than {width}: {line:?}\n{table}");
        }
    }
}

#[tokio::test]
async fn names_are_taken_where_lease_ids_are() {
    let s = Server::start().await;
    let (first, _) = leases(&s);
    let events = json(&s, ALICE, &["events", "list", "--lease", "first"]);
    let events = events.as_array().unwrap();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["lease_id"] == first.as_str()), "{events:?}");

    let (done, _, err) = berth(&s, ALICE, &["events", "list", "--lease", "nothing-called-this"]);
    assert!(!done && err.contains("no lease named"), "{err}");
    let res = "resource_type=physical:host,min=1,max=1";
    // Names are unique in a project; an admin sees two projects' `first`.
    json(
        &s,
        BOB,
        &["lease", "create", "first", "--start", &future(5, 10), "--end", &future(5, 12), "--reservation", res],
    );
    assert_eq!(json(&s, ALICE, &["lease", "show", "first"])["id"], first.as_str());
    let (done, _, err) = berth(&s, ADMIN, &["lease", "show", "first"]);
    assert!(!done && err.contains("several leases are named \"first\""), "{err}");
}

#[test]
fn completions_for_each_shell_need_no_server() {
    let run = |shell: &str| {
        let out = Command::new(berth_bin())
            .args(["completion", shell])
            .env_remove("BERTH_TOKEN")
            .env("BERTH_URL", "http://127.0.0.1:1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let bash = run("bash");
    assert!(bash.contains("complete") && bash.contains("lease") && bash.contains("--format"), "{bash}");
    // From a file: the script is past the 128 KiB one argument may hold.
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &bash).unwrap();
    let checked = Command::new("bash").arg("-n").arg(script.path()).status().unwrap();
    assert!(checked.success(), "bash reads the script");
    assert!(run("zsh").starts_with("#compdef berth"));
    let fish = run("fish");
    assert!(fish.contains("complete -c berth") && fish.contains("events"), "{fish}");
    let (_, _, err) = {
        let out = Command::new(berth_bin()).args(["completion", "tcsh"]).output().unwrap();
        (out.status.success(), (), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert!(err.contains("bash") && err.contains("fish"), "the shells are named: {err}");
}
