//! The berth CLI against a real berthd: hosts, leases, availability, in
//! table and JSON output, with BERTH_URL and BERTH_TOKEN.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use berth_testkit::{berth, berth_json as json, Server};
use reqwest::StatusCode;

fn future(days: i64, hour: u32) -> String {
    let d = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    format!("{d} {hour:02}:00")
}

/// A dry run lists the occurrences, Mondays as crontab reads `1`, and books nothing.
fn a_dry_run_lists_the_occurrences_and_books_nothing(s: &Server) {
    let dry = json(
        s,
        "alice:p1",
        &[
            "lease",
            "create",
            "weekly",
            "--start",
            "2031-03-03 00:00",
            "--cron",
            "0 9 * * 1",
            "--duration",
            "1h",
            "--until",
            "2031-03-17 00:00",
            "--reservation",
            "resource_type=physical:host,min=1,max=1",
            "--dry-run",
        ],
    );
    assert_eq!(dry.as_array().map(Vec::len), Some(2), "{dry}");
    assert_eq!(dry[1]["start_date"], "2031-03-10T09:00:00.000000");
    assert_eq!(dry[0]["fits"], true);
    let (ok, table, _) = berth(s, "alice:p1", &["lease", "list"]);
    assert!(ok && !table.contains("weekly"), "{table}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_manages_hosts_and_leases() {
    let s = Server::start().await;
    let host = json(
        &s,
        "admin",
        &["host", "create", "cli-1", "--vcpus", "4", "--memory-mb", "4096", "--local-gb", "10", "--extra", "gpu=true"],
    );
    assert_eq!(host["gpu"], "true");
    let (ok, table, _) = berth(&s, "admin", &["host", "list"]);
    assert!(ok && table.contains("cli-1") && table.contains("| hypervisor_hostname |"), "{table}");
    let (ok, _, err) = berth(&s, "alice:p1", &["host", "create", "cli-2"]);
    assert!(!ok && err.contains("403"), "{err}");

    let (start, end) = (future(3, 10), future(3, 12));
    let res = "resource_type=physical:host,min=1,max=1,resource_properties=[\"=\", \"$gpu\", \"true\"]";
    let lease =
        json(&s, "alice:p1", &["lease", "create", "cli-lease", "--start", &start, "--end", &end, "--reservation", res]);
    assert_eq!(lease["status"], "PENDING");
    let id = lease["id"].as_str().unwrap().to_string();
    // A second lease on the only GPU host overlaps: the error names the reservation.
    let (ok, _, err) =
        berth(&s, "bob:p2", &["lease", "create", "other", "--start", &start, "--end", &end, "--reservation", res]);
    assert!(!ok && err.contains("berth.lease.reservation_0.no_capacity"), "{err}");

    let (ok, table, _) = berth(&s, "alice:p1", &["lease", "list"]);
    assert!(ok && table.contains("cli-lease") && table.contains("PENDING"), "{table}");
    a_create_run_again_with_its_key_makes_nothing(&s);
    let shown = json(&s, "alice:p1", &["lease", "show", "cli-lease"]);
    assert_eq!(shown["id"], id.as_str());
    a_dry_run_lists_the_occurrences_and_books_nothing(&s);
    // A duration without a unit is refused before anything is sent.
    let (ok, _, err) = berth(&s, "alice:p1", &["lease", "update", "cli-lease", "--prolong-for", "1"]);
    assert!(!ok && err.contains("give a unit: 1m, 1h, 1d"), "{err}");
    assert_eq!(json(&s, "alice:p1", &["lease", "show", "cli-lease"])["end_date"], lease["end_date"]);
    // Reservation values go typed: the stored parameters are numbers.
    assert_eq!(lease["reservations"][0]["min"], 1, "{lease}");
    let longer = json(&s, "alice:p1", &["lease", "update", "cli-lease", "--prolong-for", "1h"]);
    assert!(longer["end_date"].as_str().unwrap().contains("T13:00:00"), "{longer}");
    let shorter = json(&s, "alice:p1", &["lease", "update", &id, "--reduce-by", "30m", "--name", "renamed"]);
    assert!(shorter["end_date"].as_str().unwrap().contains("T12:30:00"), "{shorter}");
    assert_eq!(shorter["name"], "renamed");

    let allocs = json(&s, "admin", &["host", "allocations"]);
    assert_eq!(allocs[0]["reservations"][0]["lease_id"], id.as_str());
    let advice = json(
        &s,
        "alice:p1",
        &[
            "availability",
            "--reservation",
            "resource_type=physical:host,min=1,max=1",
            "--duration",
            "2h",
            "--from",
            &future(3, 9),
            "--until",
            &future(3, 20),
            "--limit",
            "1",
        ],
    );
    assert!(advice[0]["start_date"].as_str().unwrap().contains("T12:30:00"), "{advice}");

    let (ok, out, _) = berth(&s, "alice:p1", &["lease", "delete", "renamed"]);
    assert!(ok && out.contains("Deleted lease"), "{out}");
    let (ok, out, err) = berth(&s, "admin", &["host", "delete", "cli-1"]);
    assert!(ok, "{out}{err}");
    assert!(json(&s, "admin", &["host", "list"]).as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_credentials_the_cli_says_how_to_authenticate() {
    let s = Server::start().await;
    let out = std::process::Command::new(berth_testkit::berth_bin())
        .args(["lease", "list"])
        .env("BERTH_URL", &s.url)
        .env_remove("BERTH_TOKEN")
        .env_remove("OS_CLOUD")
        .env_remove("OS_AUTH_URL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no token is guessed");
    assert!(err.contains("BERTH_TOKEN") && err.contains("OS_AUTH_URL") && err.contains("OS_CLOUD"), "{err}");
}

/// `--idempotency-key` sent twice with one request: the second command
/// answers the lease the first made; with another request, a 409.
fn a_create_run_again_with_its_key_makes_nothing(s: &Server) {
    let (start, end) = (future(6, 10), future(6, 12));
    let res = "resource_type=physical:host,min=1,max=1";
    let args = ["lease", "create", "keyed", "--start", &start, "--end", &end, "--reservation", res];
    let first = json(s, "alice:p1", &[&args[..], &["--idempotency-key", "cli-k"]].concat());
    let again = json(s, "alice:p1", &[&args[..], &["--idempotency-key", "cli-k"]].concat());
    assert_eq!(first["id"], again["id"]);
    let listed = json(s, "alice:p1", &["lease", "list"]);
    let keyed = listed.as_array().unwrap().iter().filter(|l| l["name"] == "keyed").count();
    assert_eq!(keyed, 1, "{listed}");
    let (ok, _, err) = berth(
        s,
        "alice:p1",
        &[
            "lease",
            "create",
            "keyed2",
            "--start",
            &start,
            "--end",
            &end,
            "--reservation",
            res,
            "--idempotency-key",
            "cli-k",
        ],
    );
    assert!(!ok && err.contains("409") && err.contains("idempotency_key_reused"), "{err}");
    let (ok, _, err) = berth(s, "alice:p1", &["lease", "delete", first["id"].as_str().unwrap()]);
    assert!(ok, "{err}");
}

/// A server that is not there is named, with what to check; a request
/// without a token to a noauth berthd says how the token names the caller.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_server_or_token_says_what_to_check() {
    let out = std::process::Command::new(berth_testkit::berth_bin())
        .args(["lease", "list"])
        .env("BERTH_URL", "http://127.0.0.1:9")
        .env("BERTH_TOKEN", "alice:p1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("cannot reach berthd at http://127.0.0.1:9") && err.contains("BERTH_URL"), "{err}");
    let s = Server::start().await;
    let (st, body) = s.get("/v1/leases", "").await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let message = body["error_message"].as_str().unwrap_or_default();
    assert!(message.starts_with("The request you have made requires authentication."), "{body}");
    assert!(message.contains("X-Auth-Token: user:project"), "{body}");
}

/// `berth lease create` without a reservation is a usage error (exit 2,
/// naming the options and where their keys are listed) and sends nothing;
/// `--empty` says a lease reserving nothing is meant, and makes one.
#[tokio::test(flavor = "multi_thread")]
async fn a_lease_create_without_a_reservation_is_refused_unless_empty() {
    let s = Server::start().await;
    let (start, end) = (future(7, 10), future(7, 12));
    let create = |args: &[&str]| {
        std::process::Command::new(berth_testkit::berth_bin())
            .args([&["lease", "create", "bare", "--start", &start, "--end", &end], args].concat())
            .env("BERTH_URL", &s.url)
            .env("BERTH_TOKEN", "alice:p1")
            .output()
            .unwrap()
    };
    let out = create(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--reservation resource_type=") && err.contains("--help") && err.contains("--empty"), "{err}");
    let out = create(&["--empty", "--reservation", "resource_type=physical:host,min=1,max=1"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let (st, body) = s.get("/v1/leases", "alice:p1").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body["leases"], serde_json::json!([]), "nothing was sent: {body}");
    let out = create(&["--empty"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lease = json(&s, "alice:p1", &["lease", "show", "bare"]);
    assert_eq!(lease["reservations"], serde_json::json!([]), "{lease}");
}

/// `berth lease create --help` keeps the command's own options apart from
/// the global ones, and names every key each compiled-in reservation type
/// takes, as the server lists them.
#[tokio::test(flavor = "multi_thread")]
async fn lease_create_help_names_each_types_keys_apart_from_global_options() {
    let out =
        std::process::Command::new(berth_testkit::berth_bin()).args(["lease", "create", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let (own, global) = help.split_once("Global options:").unwrap_or_else(|| panic!("no global heading:\n{help}"));
    assert!(own.contains("--reservation") && !own.contains("--os-password") && !own.contains("--url"), "{help}");
    assert!(global.contains("--os-password") && global.contains("--url") && global.contains("--format"), "{help}");
    let s = Server::start().await;
    let (st, body) = s.get("/v1/plugins", "admin").await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let reservation = own.split("--reservation ").nth(1).unwrap_or_default();
    let reservation = reservation.split("\n      --").next().unwrap_or_default();
    let typed: Vec<&serde_json::Value> =
        body["plugins"].as_array().unwrap().iter().filter(|p| p["parameters"].is_array()).collect();
    assert!(typed.len() >= 3, "the compiled-in types, each with its parameters: {body}");
    for p in typed {
        let kind = p["name"].as_str().unwrap();
        let listed =
            reservation.split(&format!("`{kind}`:")).nth(1).unwrap_or_else(|| panic!("{kind}:\n{reservation}"));
        let listed = listed.split('`').next().unwrap_or_default();
        for param in p["parameters"].as_array().unwrap() {
            let name = param["name"].as_str().unwrap();
            let words: Vec<&str> = listed.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
            assert!(words.contains(&name), "{kind} takes {name}, which the help does not name:\n{listed}");
        }
    }
}

/// `berth offers` prints each id whole, to copy; `lease create --offer`
/// books it, and again with the same key makes nothing new.
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_offers_and_books_an_offer() {
    let s = Server::start().await;
    for name in ["o1", "o2"] {
        let (ok, _, err) =
            berth(&s, "admin", &["host", "create", name, "--vcpus", "4", "--memory-mb", "4096", "--local-gb", "10"]);
        assert!(ok, "{err}");
    }
    let (from, until) = (future(3, 9), future(3, 12));
    let asked = ["offers", "--reservation", "resource_type=physical:host,min=1,max=2", "--duration", "1h"];
    let more = ["--max-duration", "3h", "--from", &from, "--until", &until, "--order", "longest", "--limit", "2"];
    let args: Vec<&str> = asked.iter().chain(more.iter()).copied().collect();
    let listed = json(&s, "alice:p1", &args);
    let offers = listed.as_array().unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(offers.len(), 1, "{listed}");
    assert_eq!(
        (offers[0]["duration"].as_i64(), offers[0]["reservations"][0]["max"].as_i64()),
        (Some(3 * 3600), Some(2))
    );
    // Each answer makes its offers anew; the table's id, whole, books.
    let (ok, table, err) = berth(&s, "alice:p1", &args);
    assert!(ok && table.contains("| 2 hosts "), "{table}{err}");
    let id = table.lines().find_map(|l| l.strip_prefix("#1 ")).unwrap_or_else(|| panic!("{table}"));
    assert!(id.len() > 100 && id.contains('.') && !id.contains(' '), "{table}");
    let book = ["lease", "create", "offered", "--offer", id, "--idempotency-key", "offer-k"];
    let first = json(&s, "alice:p1", &book);
    let again = json(&s, "alice:p1", &book);
    assert_eq!(first["id"], again["id"], "{first} {again}");
    let (ok, _, err) = berth(&s, "alice:p1", &["lease", "create", "other", "--offer", id]);
    assert!(!ok && err.contains("409") && err.contains("berth.offer.taken"), "{err}");
}
