//! `berth lease create` with a flavor:instance reservation against a real
//! berthd with a configured flavor and an hour of cleaning time.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use berth_testkit::{berth, berth_json as json, Server};

fn future(days: i64, hour: u32) -> String {
    let d = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    format!("{d} {hour:02}:00")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_reserves_instances_of_a_flavor() {
    let config = "cleaning_time = 60\n[plugins.flavor.flavors.\"7\"]\nname = \"m1.gpu\"\nvcpus = 2\nram = 1024\n";
    let s = Server::start_with_config(Some(config)).await;
    json(&s, "admin", &["host", "create", "f-1", "--vcpus", "4", "--memory-mb", "4096", "--local-gb", "10"]);
    let (start, end) = (future(3, 10), future(3, 12));
    // The flavor id goes as the number the CLI makes of it; two instances fill the host.
    let res = "resource_type=flavor:instance,flavor_id=7,amount=2";
    let lease =
        json(&s, "alice:p1", &["lease", "create", "f-lease", "--start", &start, "--end", &end, "--reservation", res]);
    assert_eq!(lease["reservations"][0]["flavor_id"], "7", "{lease}");
    let (ok, _, err) =
        berth(&s, "alice:p1", &["lease", "create", "more", "--start", &start, "--end", &end, "--reservation", res]);
    assert!(!ok && err.contains("berth.lease.reservation_0.no_capacity"), "{err}");
    // By name, after the first lease and its hour of cleaning.
    let by_name = "resource_type=flavor:instance,flavor_id=m1.gpu,amount=1";
    let (ok, _, err) = berth(
        &s,
        "alice:p1",
        &["lease", "create", "soon", "--start", &future(3, 12), "--end", &future(3, 13), "--reservation", by_name],
    );
    assert!(!ok && err.contains("no_capacity"), "within the cleaning: {err}");
    json(
        &s,
        "alice:p1",
        &["lease", "create", "later", "--start", &future(3, 13), "--end", &future(3, 14), "--reservation", by_name],
    );
    let (ok, _, err) = berth(
        &s,
        "alice:p1",
        &[
            "lease",
            "create",
            "x",
            "--start",
            &start,
            "--end",
            &end,
            "--reservation",
            "resource_type=flavor:instance,flavor_id=9,amount=1",
        ],
    );
    assert!(!ok && err.contains("not one of the configured flavors"), "{err}");
    s.replay_verify();
}
