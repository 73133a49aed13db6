//! The Manager page's controls, for real: a lease event that failed against
//! a real receiver is retried by a click and turns DONE.

use std::time::{Duration, Instant};

use berth_store::testing::TestDatabase;
use berth_testkit::{receiver, Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{enrol, Browser};

fn config(dir: &tempfile::TempDir, base: &str) -> std::path::PathBuf {
    let path = dir.path().join("berth.toml");
    let text = format!(
        r#"[manager]
poll_interval_ms = 250
claim_ttl_ms = 2000
retry_min_ms = 50
retry_max_ms = 200
max_attempts = 3
shutdown_grace_ms = 1000

[plugins]
enabled = ["physical:host", "virtual:instance"]
[plugins.drivers."virtual:instance"]
driver = "webhook"
url = "{base}/hook?fail=until_fixed"
timeout_ms = 5000
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The lease's start event once it has `status` (at most `secs`).
async fn start_event(s: &Server, lease: &str, status: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (st, body) = s.get(&format!("/v1/leases/{lease}/events?event_type=start_lease"), ADMIN).await;
        assert_eq!(st, StatusCode::OK, "{body}");
        let e = body["events"][0].clone();
        if e["status"] == status {
            return e;
        }
        assert!(Instant::now() < deadline, "start_lease never became {status}: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_event_is_retried_from_the_manager_page_and_turns_done() {
    let Some(browser) = Browser::find() else { return };
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&config(&dir, &base))).await;
    enrol(&s, "h1").await;
    let body = json!({"name": "broken", "start_date": "now", "end_date": "2031-01-01 00:00",
        "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 1}]});
    let (st, lease) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{lease}");
    let lease = lease["lease"]["id"].as_str().unwrap().to_string();
    let failed = start_event(&s, &lease, "ERROR", 20).await;
    assert_eq!(failed["attempts"], 3, "{failed}");
    let (_, l) = s.get(&format!("/v1/leases/{lease}"), ADMIN).await;
    assert_eq!(l["lease"]["status"], "ERROR", "{l}");
    // The far side is mended; only the operator's confirmed click sends the event again.
    rx.fix();
    let id = failed["id"].as_str().unwrap();
    let out = browser.drive(&s.url, "manager", &json!({"token": ADMIN, "event": id, "lease": lease})).result().await;
    assert!(out["text"].as_str().unwrap().contains("Running"), "{out}");
    assert!(out["asked"].as_str().unwrap().starts_with("Retry"), "{out}");
    // The lease in ERROR offers to be taken out of it.
    assert_eq!(out["recover_shown"], true, "{out}");
    let done = start_event(&s, &lease, "DONE", 20).await;
    // The retry reset the attempts: one more, and it went through.
    assert_eq!(done["attempts"], 1, "{done}");
    let retried =
        s.log_entries().await.iter().any(|e| {
            e["type"].as_str().is_some_and(|t| t.contains("Retried")) && e["meta"].to_string().contains("admin")
        });
    assert!(retried, "no retry by admin in the log");
    let (_, l) = s.get(&format!("/v1/leases/{lease}"), ADMIN).await;
    assert_eq!(l["lease"]["status"], "ACTIVE", "{l}");
    s.assert_no_panic();
}
