//! Lease notifications in Blazar's shapes at a real receiver: each once,
//! signed, in log order, whatever the receiver does and across a restart.

use berth_testkit::receiver::{Call, Receiver};

use super::*;

const SECRET: &str = "notification secret";

/// A configuration with the manager's quick settings and notifications to
/// `{base}/hook?{query}`, signed, and to the log.
fn notifying(dir: &tempfile::TempDir, base: &str, query: &str) -> PathBuf {
    config(
        dir,
        &format!(
            r#"[notifications]
poll_interval_ms = 100
retry_min_ms = 50
retry_max_ms = 200
[[notifications.sinks]]
kind = "webhook"
url = "{base}/hook?{query}"
secret = "{SECRET}"
timeout_ms = 10000
[[notifications.sinks]]
kind = "log"
"#
        ),
    )
}

fn host_lease(name: &str, start: &str, end: &str) -> Value {
    json!({"name": name, "start_date": start, "end_date": end,
           "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]})
}

/// Checks Blazar's envelope and payload, the signature and the headers;
/// returns (event type, lease id).
fn blazar_shaped(c: &Call) -> (String, String) {
    let body: Value = serde_json::from_slice(&c.body).unwrap();
    let mut keys: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["event_type", "message_id", "payload", "priority", "publisher_id", "timestamp"], "{body}");
    assert_eq!(body["publisher_id"], "blazar.lease");
    assert_eq!(body["priority"], "INFO");
    uuid::Uuid::parse_str(body["message_id"].as_str().unwrap()).unwrap();
    chrono::NaiveDateTime::parse_from_str(body["timestamp"].as_str().unwrap(), "%Y-%m-%d %H:%M:%S%.f").unwrap();
    let payload = body["payload"].as_object().unwrap();
    let mut fields: Vec<&str> = payload.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["end_date", "lease_id", "project_id", "start_date", "user_id"], "{body}");
    for date in ["start_date", "end_date"] {
        chrono::NaiveDateTime::parse_from_str(payload[date].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S%.f").unwrap();
    }
    assert_eq!(payload["project_id"], "p1");
    let expected = berth_plugins::driver::sign(SECRET.as_bytes(), &c.body);
    assert_eq!(c.signature.as_deref(), Some(expected.as_str()), "the signature of {body}");
    assert_eq!(c.header_key.as_deref(), body["message_id"].as_str(), "Idempotency-Key is the message id");
    (body["event_type"].as_str().unwrap().to_string(), payload["lease_id"].as_str().unwrap().to_string())
}

/// Every accepted notification has a message id of its own.
fn each_once(rx: &Receiver) -> Vec<(String, String)> {
    let accepted = rx.accepted();
    let keys: HashSet<&str> = accepted.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys.len(), accepted.len(), "a notification arrived twice: {accepted:?}");
    accepted.iter().map(blazar_shaped).collect()
}

fn counter(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{series} missing from /metrics:\n{metrics}"))
}

#[tokio::test]
async fn each_lease_notification_arrives_once_signed_in_blazars_shape() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [("BERTH_LOG", "warn,berth::notifications=info")];
    let s = Server::launch(TestDatabase::new().await, &env, Some(&notifying(&dir, &base, ""))).await;
    let zero = s.metrics().await;
    assert_eq!(counter(&zero, r#"berth_notifications_delivered_total{sink="webhook"}"#), 0.0);
    enrol(&s, "h1").await;
    let l = create(&s, ALICE, host_lease("short", &in_secs(2), &in_secs(4))).await;
    let id = l["id"].as_str().unwrap().to_string();
    let (st, body) = s.put(&format!("/v1/leases/{id}"), ALICE, json!({"name": "renamed"})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    wait_event(&s, &id, "end_lease", "DONE", 20).await;
    let (st, body) = s.delete(&format!("/v1/leases/{id}"), ALICE).await;
    assert!(st.is_success(), "{body}");
    rx.wait_for(10, "six notifications", |c| c.len() >= 6).await;
    // Nothing more comes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.calls().len(), 6, "{:?}", rx.calls());
    let got = each_once(&rx);
    assert!(got.iter().all(|(_, lease)| *lease == id), "{got:?}");
    let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds[..2], ["lease.create", "lease.update"], "{kinds:?}");
    assert_eq!(kinds[5], "lease.delete", "{kinds:?}");
    let mut events = kinds[2..5].to_vec();
    events.sort_unstable();
    assert_eq!(events, ["lease.event.before_end_lease", "lease.event.end_lease", "lease.event.start_lease"]);
    let start = kinds.iter().position(|k| *k == "lease.event.start_lease").unwrap();
    let end = kinds.iter().position(|k| *k == "lease.event.end_lease").unwrap();
    assert!(start < end, "{kinds:?}");
    let metrics = s.metrics().await;
    assert_eq!(counter(&metrics, r#"berth_notifications_delivered_total{sink="webhook"}"#), 6.0);
    assert_eq!(counter(&metrics, r#"berth_notifications_delivered_total{sink="log"}"#), 6.0);
    assert_eq!(counter(&metrics, r#"berth_notifications_failed_total{sink="webhook"}"#), 0.0);
    // The log sink: one line each, with the same message ids.
    let log = s.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("berth::notifications")).collect();
    assert_eq!(lines.len(), 6, "{log}");
    for c in rx.accepted() {
        assert_eq!(lines.iter().filter(|l| l.contains(&c.key)).count(), 1, "{} in {lines:?}", c.key);
    }
}

#[tokio::test]
async fn a_receiver_down_then_back_gets_every_notification_once_in_order() {
    let (rx, base) = receiver::start().await;
    rx.set_down(true);
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&notifying(&dir, &base, ""))).await;
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        enrol(&s, &format!("h{name}")).await;
        let l = create(&s, ALICE, host_lease(name, &in_secs(3600), &in_secs(7200))).await;
        ids.push(l["id"].as_str().unwrap().to_string());
    }
    let (st, body) = s.put(&format!("/v1/leases/{}", ids[0]), ALICE, json!({"name": "a2"})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let (st, body) = s.delete(&format!("/v1/leases/{}", ids[1]), ALICE).await;
    assert!(st.is_success(), "{body}");
    rx.wait_for(10, "attempts while down", |c| c.len() >= 4).await;
    assert!(rx.accepted().is_empty());
    assert!(counter(&s.metrics().await, r#"berth_notifications_failed_total{sink="webhook"}"#) >= 4.0);
    rx.set_down(false);
    rx.wait_for(20, "every notification", |_| rx.accepted().len() >= 5).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = each_once(&rx);
    let expected = [
        ("lease.create", &ids[0]),
        ("lease.create", &ids[1]),
        ("lease.create", &ids[2]),
        ("lease.update", &ids[0]),
        ("lease.delete", &ids[1]),
    ];
    let expected: Vec<(String, String)> = expected.iter().map(|(k, id)| (k.to_string(), id.to_string())).collect();
    assert_eq!(got, expected);
    assert_eq!(counter(&s.metrics().await, r#"berth_notifications_delivered_total{sink="webhook"}"#), 5.0);
}

#[tokio::test]
async fn a_slow_receiver_does_not_delay_the_lease_start() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::launch(TestDatabase::new().await, &[], Some(&notifying(&dir, &base, "delay_ms=6000"))).await;
    enrol(&s, "h1").await;
    let due = Utc::now() + chrono::Duration::seconds(2);
    let l = create(&s, ALICE, host_lease("slow", &rfc(due), &in_secs(3600))).await;
    let id = l["id"].as_str().unwrap().to_string();
    rx.wait_for(5, "lease.create sent", |c| !c.is_empty()).await;
    wait_event(&s, &id, "start_lease", "DONE", 10).await;
    let late = Utc::now() - due;
    // The receiver still holds lease.create: the start did not wait for it.
    assert!(rx.accepted().is_empty(), "{:?}", rx.accepted());
    assert!(late < chrono::Duration::seconds(2), "the start fired {late} after it was due");
    rx.wait_for(20, "both notifications", |_| rx.accepted().len() >= 2).await;
    let kinds: Vec<String> = each_once(&rx).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["lease.create", "lease.event.start_lease"]);
}

#[tokio::test]
async fn a_restarted_berthd_does_not_send_again_what_was_delivered() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::launch(TestDatabase::new().await, &[], Some(&notifying(&dir, &base, ""))).await;
    enrol(&s, "h1").await;
    let l = create(&s, ALICE, host_lease("kept", &in_secs(3600), &in_secs(7200))).await;
    let id = l["id"].as_str().unwrap().to_string();
    let (st, body) = s.put(&format!("/v1/leases/{id}"), ALICE, json!({"name": "kept2"})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    rx.wait_for(10, "two notifications", |_| rx.accepted().len() >= 2).await;
    // Delivered as berthd sees it (the cursor moves right after).
    let delivered = r#"berth_notifications_delivered_total{sink="webhook"}"#;
    while counter(&s.metrics().await, delivered) < 2.0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(s.terminate().success());
    s.start_again().await;
    let (st, body) = s.delete(&format!("/v1/leases/{id}"), ALICE).await;
    assert!(st.is_success(), "{body}");
    rx.wait_for(10, "the deletion", |_| rx.accepted().len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kinds: Vec<String> = each_once(&rx).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["lease.create", "lease.update", "lease.delete"]);
    assert_eq!(rx.calls().len(), 3);
}

#[tokio::test]
async fn two_replicas_send_each_notification_once_and_one_takes_over() {
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = notifying(&dir, &base, "");
    let db = TestDatabase::new().await;
    let db2 = TestDatabase { url: db.url.clone(), name: db.name.clone() };
    let mut a = Server::launch(db, &[], Some(&cfg)).await;
    let b = Server::launch(db2, &[], Some(&cfg)).await;
    let mut ids = Vec::new();
    for (i, s) in [&a, &b, &a].into_iter().enumerate() {
        enrol(s, &format!("h{i}")).await;
        ids.push(create(s, ALICE, host_lease(&format!("r{i}"), &in_secs(3600), &in_secs(7200))).await["id"].clone());
    }
    rx.wait_for(10, "three notifications", |_| rx.accepted().len() >= 3).await;
    // Delivered as the holder sees it, and its cursor moved (right after).
    let delivered = r#"berth_notifications_delivered_total{sink="webhook"}"#;
    while counter(&a.metrics().await, delivered) + counter(&b.metrics().await, delivered) < 3.0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Whichever held the role, the one left delivers what comes next.
    a.kill();
    for i in 3..5 {
        enrol(&b, &format!("h{i}")).await;
        ids.push(create(&b, ALICE, host_lease(&format!("r{i}"), &in_secs(3600), &in_secs(7200))).await["id"].clone());
    }
    rx.wait_for(15, "five notifications", |_| rx.accepted().len() >= 5).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = each_once(&rx);
    assert_eq!(rx.calls().len(), 5, "{:?}", rx.calls());
    let expected: Vec<(String, String)> =
        ids.iter().map(|id| ("lease.create".to_string(), id.as_str().unwrap().to_string())).collect();
    assert_eq!(got, expected);
}
