//! `berth host update --disable / --enable` and `berth maintenance` against
//! a real berthd: the lease on the disabled (or maintained) host moves, and
//! the host can be enabled again (the window cancelled).

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

#[tokio::test(flavor = "multi_thread")]
async fn a_maintenance_window_moves_the_lease_it_hits_and_can_be_cancelled() {
    let s = Server::start().await;
    for h in ["mnt-a", "mnt-b"] {
        json(&s, "admin", &["host", "create", h, "--vcpus", "4", "--memory-mb", "4096", "--local-gb", "10"]);
    }
    let (start, end) = (future(3, 10), future(3, 12));
    let res = "resource_type=physical:host,min=1,max=1";
    let l = json(&s, "alice:p1", &["lease", "create", "fw", "--start", &start, "--end", &end, "--reservation", res]);
    let held = l["reservations"][0]["allocations"][0]["resource_id"].as_str().unwrap().to_string();
    let name = json(&s, "admin", &["host", "show", &held])["hypervisor_hostname"].as_str().unwrap().to_string();
    let (m_start, m_end) = (future(3, 9), future(3, 11));
    let (ok, _, err) =
        berth(&s, "alice:p1", &["maintenance", "create", "--host", &name, "--start", &m_start, "--end", &m_end]);
    assert!(!ok, "a user may not schedule maintenance");
    assert!(err.contains("403") || err.to_lowercase().contains("forbidden") || err.contains("policy"), "{err}");
    let made = json(
        &s,
        "admin",
        &["maintenance", "create", "--host", &name, "--start", &m_start, "--end", &m_end, "--heal", "--reason", "fw"],
    );
    assert_eq!(made["maintenance"]["hosts"][0], held.as_str(), "{made}");
    assert_eq!(made["leases"][0]["lease_id"], l["id"], "the lease holding the host is hit: {made}");
    let now = json(&s, "alice:p1", &["lease", "show", l["id"].as_str().unwrap()]);
    assert_ne!(now["reservations"][0]["allocations"][0]["resource_id"], held.as_str(), "healed away: {now}");
    let id = made["maintenance"]["id"].as_str().unwrap().to_string();
    let (ok, table, err) = berth(&s, "admin", &["maintenance", "list"]);
    assert!(ok, "{err}");
    assert!(table.contains(&id) && table.contains("fw"), "{table}");
    let (ok, out, err) = berth(&s, "admin", &["maintenance", "delete", &id]);
    assert!(ok && out.contains(&id), "{out}{err}");
    let list = json(&s, "admin", &["maintenance", "list"]);
    assert_eq!(list, serde_json::json!([]), "cancelled: {list}");
    s.replay_verify();
}
