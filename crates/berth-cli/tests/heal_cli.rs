//! `berth host update --disable / --enable` against a real berthd: the
//! lease on the disabled host moves, and the host can be enabled again.

use berth_testkit::{berth, berth_json as json, Server};

fn future(days: i64, hour: u32) -> String {
    #[allow(clippy::disallowed_methods)] // a date for the lease, as a user picks one
    let d = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    format!("{d} {hour:02}:00")
}

#[tokio::test(flavor = "multi_thread")]
async fn disabling_a_host_moves_its_lease_and_enabling_it_makes_it_reservable() {
    let s = Server::start().await;
    for h in ["cli-a", "cli-b"] {
        json(&s, "admin", &["host", "create", h, "--vcpus", "4", "--memory-mb", "4096", "--local-gb", "10"]);
    }
    let (start, end) = (future(2, 10), future(2, 12));
    let res = "resource_type=physical:host,min=1,max=1";
    let l =
        json(&s, "alice:p1", &["lease", "create", "healed", "--start", &start, "--end", &end, "--reservation", res]);
    let held = l["reservations"][0]["allocations"][0]["resource_id"].as_str().unwrap().to_string();
    let host = json(&s, "admin", &["host", "update", &held, "--disable"]);
    assert_eq!(host["disabled"], true, "{host}");
    let (ok, table, err) = berth(&s, "admin", &["host", "list"]);
    assert!(ok, "{err}");
    assert!(table.contains("disabled"), "{table}");
    let now = json(&s, "alice:p1", &["lease", "show", l["id"].as_str().unwrap()]);
    assert_ne!(now["reservations"][0]["allocations"][0]["resource_id"], held.as_str(), "{now}");
    assert_eq!(now["degraded"], true);
    let host = json(&s, "admin", &["host", "update", &held, "--enable"]);
    assert_eq!(host["disabled"], false, "{host}");
    let (ok, _, err) = berth(&s, "admin", &["host", "update", &held, "--disable", "--enable"]);
    assert!(!ok, "both at once is refused");
    assert!(err.contains("cannot be used with"), "{err}");
    s.replay_verify();
}
