//! `berth quota` and `berth usage` against a real berthd.

use berth_testkit::{berth, berth_json as json, Server};

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_sets_shows_and_unsets_quotas_and_reports_usage() {
    let s = Server::start().await;
    let d = json(&s, "admin", &["quota", "set", "VCPU=20", "leases=5"]);
    assert_eq!(d["quotas"], serde_json::json!({"VCPU": 20, "leases": 5}));
    json(&s, "admin", &["quota", "set", "--project", "p1", "VCPU=8"]);
    json(&s, "admin", &["quota", "set", "--project", "p1", "--user", "alice", "VCPU=2"]);
    let (ok, table, err) = berth(&s, "alice:p1", &["quota", "show", "--project", "p1"]);
    assert!(ok && table.contains("VCPU") && table.contains('8') && table.contains("leases"), "{table}{err}");
    let u = json(&s, "alice:p1", &["quota", "show", "--project", "p1", "--user", "alice"]);
    assert_eq!(u["quotas"]["VCPU"], 2);
    assert_eq!(u["sources"], serde_json::json!({"VCPU": "user", "leases": "default"}));
    // A user's table marks its own limits apart from those it inherits.
    let (ok, table, err) = berth(&s, "alice:p1", &["quota", "show", "--project", "p1", "--user", "alice"]);
    let row = |r: &str| table.lines().find(|l| l.contains(r)).unwrap_or_default().to_string();
    assert!(ok && table.contains("Source"), "{table}{err}");
    assert!(row("VCPU").contains("user") && row("leases").contains("default"), "{table}");
    // Members may not write; bad input is refused with its code.
    let (ok, _, err) = berth(&s, "alice:p1", &["quota", "set", "--project", "p1", "VCPU=80"]);
    assert!(!ok && err.contains("403"), "{err}");
    let (ok, _, err) = berth(&s, "admin", &["quota", "set", "--project", "p1", "VCPU=-7"]);
    assert!(!ok && err.contains("berth.quota.invalid"), "{err}");
    // Usage of the token's own project, as a table and as JSON.
    let (ok, table, err) = berth(&s, "alice:p1", &["usage"]);
    assert!(ok && table.contains("VCPU") && table.contains("leases"), "{table}{err}");
    // "In use" is now, the peak is over the window asked: the headers say so.
    assert!(table.contains("In use now") && table.contains("Peak in window"), "{table}");
    let usage = json(&s, "alice:p1", &["usage", "--start", "now", "--end", "2999-01-01 00:00"]);
    assert_eq!(usage["usage"]["VCPU"]["limit"], 8);
    assert_eq!(usage["end"].as_str().map(|e| e.starts_with("2999-01-01")), Some(true));
    // Unset: the user's and the project's limits fall back.
    json(&s, "admin", &["quota", "unset", "--project", "p1", "--user", "alice"]);
    let p = json(&s, "admin", &["quota", "unset", "--project", "p1", "VCPU"]);
    assert_eq!(p["quotas"]["VCPU"], 20);
    json(&s, "admin", &["quota", "unset", "leases"]);
    let d = json(&s, "admin", &["quota", "show"]);
    assert_eq!(d["quotas"], serde_json::json!({"VCPU": 20}));
}
