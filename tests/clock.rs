//! One clock, black box: two berthd share a database, one with its clock ten
//! minutes ahead and one ten minutes behind (libfaketime on the berthd
//! processes only; the database server and this test keep the true time).
//! Every decision must be made on the database's clock, so both behave as
//! if their clocks were right.

// The test itself reads the real clock, which is the database server's (one
// machine); it checks that once.
#![allow(clippy::disallowed_methods)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_store::queries::lease_events::{LeaseEventFilter, LeaseEventRow};
use berth_store::testing::TestDatabase;
use berth_store::Cursor;
use berth_testkit::{receiver, Server, ALICE};
use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The skew given to each replica, in seconds.
const SKEW_S: f64 = 600.0;
/// Claims hold this long without renewal; hooks take longer, so every
/// claim lives only because its holder renews it. Long enough that a
/// replica stalled a second or two by a loaded machine (the whole suite,
/// browsers included, on 2 cores) still renews in time: at 2 s, one run
/// lost a claim to the other replica and the hook ran three times.
const CLAIM_TTL_MS: u64 = 4_000;
const HOOK_MS: u64 = 6_000;

/// libfaketime from the distribution's package (`make deps` installs it).
fn libfaketime() -> PathBuf {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu/faketime",
        "/usr/lib/aarch64-linux-gnu/faketime",
        "/usr/lib64/faketime",
        "/usr/lib/faketime",
    ];
    dirs.iter()
        .map(|d| Path::new(d).join("libfaketime.so.1"))
        .find(|p| p.exists())
        .expect("libfaketime is missing: `make deps` installs it (Debian/Ubuntu package faketime)")
}

/// Environment that shifts a process's wall clock by `offset` (e.g.
/// `+10m`) and leaves its monotonic clock (tokio's timers) alone.
fn skewed(lib: &Path, offset: &str) -> Vec<(&'static str, String)> {
    vec![
        ("LD_PRELOAD", lib.display().to_string()),
        ("FAKETIME", offset.to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
        ("DONT_FAKE_MONOTONIC", "1".to_string()),
    ]
}

fn as_refs<'a>(e: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    e.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn config(dir: &tempfile::TempDir, base: &str) -> PathBuf {
    let path = dir.path().join("berth.toml");
    // A long poll: events must fire because the manager scheduled them,
    // not because it happened to look.
    let text = format!(
        r#"[manager]
poll_interval_ms = 60000
claim_ttl_ms = {CLAIM_TTL_MS}
[plugins]
enabled = ["virtual:thing"]
[plugins.external."virtual:thing"]
driver = "webhook"
url = "{base}/hook?validate=nothing&delay_ms={HOOK_MS}"
timeout_ms = 30000
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A date as Blazar shows it (naive, UTC).
fn shown(v: &Value) -> DateTime<Utc> {
    let s = v.as_str().unwrap_or_else(|| panic!("not a date: {v}"));
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").unwrap_or_else(|e| panic!("{s}: {e}")).and_utc()
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_microseconds().unwrap() as f64 / 1e6
}

/// The database server's clock, read on a connection of the test's own
/// (not through the code under test).
struct DatabaseClock(tokio_postgres::Client);

impl DatabaseClock {
    async fn connect(url: &str) -> DatabaseClock {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        DatabaseClock(client)
    }

    async fn now(&self) -> DateTime<Utc> {
        self.0.query_one("SELECT statement_timestamp() AS now", &[]).await.unwrap().get("now")
    }
}

/// Creates a lease through `s`; returns it with the database's time just
/// before and just after.
async fn create(s: &Server, clock: &DatabaseClock, body: Value) -> (Value, DateTime<Utc>, DateTime<Utc>) {
    let before = clock.now().await;
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    let after = clock.now().await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    (l["lease"].clone(), before, after)
}

/// The offset `/readyz` reports, and the one `/metrics` exports.
async fn offsets(s: &Server) -> (f64, f64) {
    let ready: Value = reqwest::get(format!("{}/readyz", s.url)).await.unwrap().json().await.unwrap();
    let reported = ready["clock"]["offset_seconds"].as_f64().unwrap_or_else(|| panic!("{ready}"));
    assert_eq!(ready["clock"]["skewed"], true, "{ready}");
    let metrics = s.metrics().await;
    let exported = metrics
        .lines()
        .find_map(|l| l.strip_prefix("berth_clock_offset_seconds "))
        .unwrap_or_else(|| panic!("berth_clock_offset_seconds missing from /metrics:\n{metrics}"))
        .trim()
        .parse()
        .unwrap();
    (reported, exported)
}

#[tokio::test]
async fn skewed_replicas_decide_on_the_database_clock() {
    let lib = libfaketime();
    let (rx, base) = receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &base);
    let db = TestDatabase::new().await;
    let db2 = TestDatabase { url: db.url.clone(), name: db.name.clone() };
    let store = db.store(2);
    let clock = DatabaseClock::connect(&db.url).await;
    // This test's clock is the database's (same machine): its receiver
    // stamps hook calls with it.
    let local_minus_db = secs(Utc::now() - clock.now().await);
    assert!(local_minus_db.abs() < 0.5, "the test's clock is {local_minus_db} s off the database's");

    let (ahead_env, behind_env) = (skewed(&lib, "+10m"), skewed(&lib, "-10m"));
    let ahead = Server::launch(db, &as_refs(&ahead_env), Some(&cfg)).await;
    let behind = Server::launch(db2, &as_refs(&behind_env), Some(&cfg)).await;

    // The skew is real, measured and exported.
    for (s, sign) in [(&ahead, 1.0), (&behind, -1.0)] {
        let (reported, exported) = offsets(s).await;
        println!("offset reported {reported:.3} s, exported {exported:.3} s");
        assert!((reported - sign * SKEW_S).abs() < 5.0, "/readyz says {reported}");
        assert!((exported - sign * SKEW_S).abs() < 5.0, "/metrics says {exported}");
    }

    let servers = [&ahead, &behind];
    let due = create_due_leases(servers, &clock).await;
    assert_each_start_fired_once_on_time(&rx, &due, local_minus_db).await;

    // The hooks outlive an unrenewed claim; each is finished once, by the
    // replica that claimed it, whose claim was renewed meanwhile and never
    // taken back by the other.
    let ids: Vec<uuid::Uuid> = due.keys().map(|k| k.parse().unwrap()).collect();
    let rows = until_done(&store, &ids).await;
    assert_eq!(rows.len(), due.len());
    for e in &rows {
        assert_eq!(e.attempts, 1, "{e:?}");
    }
    assert_each_claim_held_by_renewal(&store, &ids).await;
    for s in servers {
        let m = s.metrics().await;
        for name in ["berth_manager_claim_rescues_total", "berth_manager_claims_lost_total"] {
            let n: f64 = m
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0.0);
            assert_eq!(n, 0.0, "{name} on {}", s.url);
        }
    }
    ahead.replay_verify();
}

/// Twelve leases due 30 to 85 s ahead by the database's clock, half through
/// each replica (the one ahead once refused such starts as in the past), and
/// one starting "now" through each, each stamped with the database's time;
/// their start events' ids and due times.
async fn create_due_leases(servers: [&Server; 2], clock: &DatabaseClock) -> HashMap<String, DateTime<Utc>> {
    let t0 = clock.now().await;
    let mut due: HashMap<String, DateTime<Utc>> = HashMap::new();
    let mut made = Vec::new();
    for k in 0..12 {
        let start = t0 + chrono::Duration::seconds(30 + 5 * k);
        let body = json!({"name": format!("l{k}"), "start_date": rfc(start),
                          "end_date": rfc(start + chrono::Duration::hours(1)),
                          "reservations": [{"resource_type": "virtual:thing", "n": k}]});
        made.push(create(servers[k as usize % 2], clock, body).await);
    }
    for (i, s) in servers.iter().enumerate() {
        let body = json!({"name": format!("now{i}"), "start_date": "now",
                          "end_date": rfc(t0 + chrono::Duration::hours(1)),
                          "reservations": [{"resource_type": "virtual:thing", "n": 100 + i}]});
        let (lease, before, after) = create(s, clock, body).await;
        let start = shown(&lease["start_date"]);
        assert!(before <= start && start <= after, "start_date: now gave {start}, database said {before}..{after}");
        made.push((lease, before, after));
    }
    assert!(clock.now().await < t0 + chrono::Duration::seconds(30), "creating took too long to mean anything");
    for (lease, before, after) in &made {
        let created = shown(&lease["created_at"]);
        let start = shown(&lease["start_date"]);
        assert!(
            created >= *before - chrono::Duration::seconds(1) && created <= *after + chrono::Duration::seconds(1),
            "created_at {created} is not the database's time ({before}..{after})"
        );
        let start_event =
            lease["events"].as_array().unwrap().iter().find(|e| e["event_type"] == "start_lease").unwrap();
        assert_eq!(shown(&start_event["time"]), start);
        due.insert(start_event["id"].as_str().unwrap().to_string(), start);
    }
    due
}

/// Every start fires once, no earlier than due and at most 2 s after, by the
/// database's clock.
async fn assert_each_start_fired_once_on_time(
    rx: &receiver::Receiver,
    due: &HashMap<String, DateTime<Utc>>,
    local_minus_db: f64,
) {
    let deadline = Instant::now() + Duration::from_secs(110);
    let fired = loop {
        let calls = rx.calls_of("on_start");
        let fired: HashSet<&str> =
            calls.iter().filter_map(|c| due.keys().find(|id| c.key.starts_with(*id))).map(String::as_str).collect();
        if fired.len() == due.len() {
            break calls;
        }
        assert!(Instant::now() < deadline, "only {} of {} starts fired", fired.len(), due.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for (id, at) in due {
        let calls: Vec<_> = fired.iter().filter(|c| c.key.starts_with(id.as_str())).collect();
        assert_eq!(calls.len(), 1, "event {id}: one hook call, not {}", calls.len());
        let late = secs(calls[0].received - *at) - local_minus_db;
        println!("event {id} due {at}: hook called {late:+.3} s after due");
        assert!(late >= 0.0, "event {id} fired {:.3} s early", -late);
        assert!(late <= 2.0, "event {id} fired {late:.3} s late");
    }
}

/// The lease events `ids`, once all are DONE (up to 20 s).
async fn until_done(store: &berth_store::Store, ids: &[uuid::Uuid]) -> Vec<LeaseEventRow> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = store.lease_events(&LeaseEventFilter { limit: Some(100), ..Default::default() }).await.unwrap();
        let ours: Vec<_> = rows.into_iter().filter(|e| ids.contains(&e.id)).collect();
        if ours.iter().all(|e| e.status == "DONE") {
            return ours;
        }
        assert!(Instant::now() < deadline, "not all starts DONE: {ours:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each of the events `ids` was claimed once, never taken from a live
/// replica, and its claim renewed by its holder only.
async fn assert_each_claim_held_by_renewal(store: &berth_store::Store, ids: &[uuid::Uuid]) {
    let mut log = Vec::new();
    let mut cursor = Cursor::START;
    loop {
        let page = store.read_log(cursor, 1000).await.unwrap();
        let Some(last) = page.last() else { break };
        cursor = last.cursor();
        log.extend(page);
    }
    let of = |kind: &str, id: &uuid::Uuid| -> Vec<Value> {
        log.iter().filter(|r| r.event_type == kind && r.data["event"] == json!(id)).map(|r| r.data.clone()).collect()
    };
    let mut per_claimer: HashMap<String, usize> = HashMap::new();
    for id in ids {
        let claims = of("LeaseEventClaimed", id);
        assert_eq!(claims.len(), 1, "event {id} claimed once: {claims:?}");
        assert!(claims[0].get("rescued_from").is_none(), "event {id} was taken from a live replica: {claims:?}");
        let holder = claims[0]["claimed_by"].as_str().unwrap().to_string();
        let renewals = of("LeaseEventClaimRenewed", id);
        assert!(!renewals.is_empty(), "event {id}: its claim was never renewed, yet the hook outlived it");
        assert!(renewals.iter().all(|r| r["claimed_by"] == json!(holder)), "{renewals:?}");
        *per_claimer.entry(holder).or_default() += 1;
    }
    println!("events per replica: {per_claimer:?}");
}
