//! What must hold after the switch.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_postgres::LocalPostgres;
use berth_store::queries::lease_events::{LeaseEventFilter, LeaseEventRow};
use berth_store::{Cursor, PoolSettings, RecordedEvent, Store};
use berth_testkit::receiver::Receiver;
use berth_testkit::{Server, ADMIN};
use tokio::task::JoinHandle;

use super::load::{Op, Outcome, CAPACITY};

/// How long after the promotion every request is served again.
const BACK_WITHIN: Duration = Duration::from_secs(5);

pub struct Switch {
    pub stopped: Instant,
    pub promoted: Instant,
}

impl Switch {
    /// Every request answered, none hung; 503 (with `Retry-After` and the
    /// code) only between the stop and 5 s after the promotion; served again
    /// within 5 s of it.
    pub fn check_answers(&self, outcomes: &[Outcome]) {
        let back = self.promoted + BACK_WITHIN;
        let mut unavailable = 0;
        for o in outcomes {
            let status = o.status.unwrap_or_else(|| panic!("no answer: {o:?}"));
            assert!(o.finished - o.started < Duration::from_secs(12), "hung: {o:?}");
            match status {
                200 | 201 | 204 | 409 => {}
                // A consumer whose claim had no clear answer, deleted
                // (nothing_acknowledged_lost checks the claim was unclear).
                404 if o.op == Op::Delete => {}
                503 => {
                    unavailable += 1;
                    assert!(o.retry_after, "503 without Retry-After: {o:?}");
                    let code = o.body["code"].as_str().or(o.body["errors"][0]["code"].as_str());
                    // A write whose COMMIT the old primary never answered
                    // may have been made: it says so.
                    assert!(matches!(code, Some("berth.unavailable" | "berth.outcome_unknown")), "{o:?}");
                    assert!(o.finished >= self.stopped && o.finished <= back, "503 outside the switch: {o:?}");
                }
                _ => panic!("unexpected answer: {o:?}"),
            }
        }
        let first = outcomes
            .iter()
            .filter(|o| o.ok() && o.started >= self.promoted)
            .map(|o| o.finished)
            .min()
            .expect("a request served after the promotion");
        println!(
            "{} requests, {unavailable} answered 503; first served {:?} after the promotion",
            outcomes.len(),
            first - self.promoted
        );
        assert!(first <= back, "first request served {:?} after the promotion", first - self.promoted);
        for op in [Op::Claim, Op::Delete, Op::Lease] {
            let after: Vec<_> = outcomes.iter().filter(|o| o.op == op && o.started >= self.promoted).collect();
            assert!(
                after.iter().any(|o| o.ok()),
                "no {op:?} served by the new primary: {:?}",
                after.iter().map(|o| (o.status, o.body.to_string())).take(5).collect::<Vec<_>>()
            );
        }
    }
}

/// Every acknowledged claim, delete and lease is on the new primary, and
/// the provider holds no more than its capacity.
pub async fn nothing_acknowledged_lost(s: &Server, outcomes: &[Outcome], provider: &str) {
    // Per consumer, what the last answered request says it is (None: a
    // request without a clear answer; either is right).
    let mut consumers: HashMap<&str, Option<bool>> = HashMap::new();
    for o in outcomes.iter().filter(|o| o.op != Op::Lease) {
        let before = consumers.get(o.id.as_str()).copied().flatten();
        if o.op == Op::Delete && o.status == Some(404) {
            assert_eq!(before, None, "a delete found no consumer {}, whose claim was acknowledged", o.id);
        }
        let present = match (o.op, o.status) {
            (Op::Claim, Some(s)) if (200..300).contains(&s) => Some(true),
            (Op::Claim, Some(409)) => before.or(Some(false)),
            (Op::Delete, Some(s)) if (200..300).contains(&s) || s == 404 => Some(false),
            _ => None,
        };
        consumers.insert(&o.id, present);
    }
    let mut checked = 0;
    for (consumer, present) in &consumers {
        let Some(present) = present else { continue };
        let (_, body) = s.get(&format!("/placement/allocations/{consumer}"), ADMIN).await;
        let held = body["allocations"].as_object().is_some_and(|a| !a.is_empty());
        assert_eq!(held, *present, "consumer {consumer}: {body}");
        checked += 1;
    }
    let (_, usages) = s.get(&format!("/placement/resource_providers/{provider}/usages"), ADMIN).await;
    let used = usages["usages"]["VCPU"].as_i64().unwrap_or(0);
    println!("{checked} consumers as acknowledged; {used} of {CAPACITY} VCPUs held");
    assert!(used <= CAPACITY, "over capacity: {usages}");
    let leases: Vec<&Outcome> = outcomes.iter().filter(|o| o.op == Op::Lease && o.ok()).collect();
    for l in &leases {
        let (st, body) = s.get(&format!("/v1/leases/{}", l.id), ADMIN).await;
        assert_eq!(st.as_u16(), 200, "acknowledged lease {} lost: {body}", l.id);
    }
    println!("{} acknowledged leases all there", leases.len());
}

/// Both managers' LISTEN connections are on the new primary.
pub async fn listening_on_the_new_primary(primary: &LocalPostgres) {
    let (c, conn) = tokio_postgres::connect(&primary.url("postgres"), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..100 {
        let n: i64 = c
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN berth_lease_events%'", &[])
            .await
            .unwrap()
            .get(0);
        if n >= 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the managers did not LISTEN on the new primary");
}

/// Every lease event due by now ends DONE, finished once in the log, with
/// one idempotency key however many times its hook was called (a read the
/// database refuses, as during a switch, is tried again); the events.
pub(crate) async fn every_lease_event_done_once(store: &Store, rx: &Receiver) -> Vec<LeaseEventRow> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let filter = LeaseEventFilter { limit: Some(10_000), ..Default::default() };
        if let Ok(rows) = store.lease_events(&filter).await {
            let now = chrono::Utc::now();
            let rows: Vec<_> = rows.into_iter().filter(|e| e.time <= now).collect();
            if rows.iter().all(|e| e.status == "DONE") {
                break rows;
            }
            let waiting: Vec<_> = rows.iter().filter(|e| e.status != "DONE").take(3).collect();
            assert!(Instant::now() < deadline, "not all lease events done: {waiting:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let log = read_all(store, Cursor::START).await;
    let mut finished: HashMap<String, usize> = HashMap::new();
    for e in log.iter().filter(|e| e.event_type == "LeaseEventFinished") {
        *finished.entry(e.data["event"].as_str().unwrap().to_string()).or_default() += 1;
    }
    let mut keys: HashMap<String, HashSet<String>> = HashMap::new();
    for c in rx.calls().iter().filter(|c| c.action != "validate") {
        let event = c.key.split(':').next().unwrap().to_string();
        keys.entry(event).or_default().insert(c.key.clone());
    }
    for e in &rows {
        let id = e.id.to_string();
        assert_eq!(finished.get(&id), Some(&1), "lease event {id} finished once: {e:?}");
        assert_eq!(keys.get(&id).map(HashSet::len), Some(1), "lease event {id} fired with one key: {e:?}");
    }
    println!(
        "{} lease events due, each DONE once; {} attempted more than once",
        rows.len(),
        rows.iter().filter(|e| e.attempts > 1).count()
    );
    rows
}

pub async fn read_all(store: &Store, mut after: Cursor) -> Vec<RecordedEvent> {
    let mut all = Vec::new();
    loop {
        let page = store.read_log(after, 1000).await.expect("read the log");
        let Some(last) = page.last() else { return all };
        after = last.cursor();
        all.extend(page);
    }
}

/// A log reader following the log through the switch, on the URL berthd has.
pub struct Reader {
    pub store: Store,
    stop: Arc<AtomicBool>,
    task: JoinHandle<(Vec<RecordedEvent>, usize)>,
}

impl Reader {
    pub fn start(url: &str) -> Reader {
        let ms = Duration::from_millis;
        let settings = PoolSettings {
            max_size: 4,
            wait_timeout: Some(ms(2000)),
            connect_timeout: Some(ms(2000)),
            statement_timeout: Some(ms(5000)),
            ..PoolSettings::default()
        };
        let store = Store::connect_with(url, &settings).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (store.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let (mut seen, mut failures, mut after) = (Vec::new(), 0, Cursor::START);
            loop {
                match s.read_log(after, 500).await {
                    Ok(page) if page.is_empty() && halt.load(Ordering::Relaxed) => return (seen, failures),
                    Ok(page) => {
                        if let Some(last) = page.last() {
                            after = last.cursor();
                        }
                        seen.extend(page);
                    }
                    Err(_) => failures += 1,
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Reader { store, stop, task }
    }

    /// What it read, once it has read to the end.
    pub async fn stop(self) -> Read {
        self.stop.store(true, Ordering::Relaxed);
        let (seen, failures) = self.task.await.unwrap();
        let all = read_all(&self.store, Cursor::START).await;
        Read { store: self.store, seen, failures, all }
    }
}

pub struct Read {
    store: Store,
    seen: Vec<RecordedEvent>,
    failures: usize,
    /// The whole log, read from the start on the new primary.
    all: Vec<RecordedEvent>,
}

/// The reader that followed the log through the switch read it all, in
/// order, once; a cursor taken before the switch reads every event
/// written after it.
pub async fn the_log_reads_on(read: &Read, before: &Cursor, stopped_at: chrono::DateTime<chrono::Utc>) {
    let seen: Vec<Cursor> = read.seen.iter().map(RecordedEvent::cursor).collect();
    let all: Vec<Cursor> = read.all.iter().map(RecordedEvent::cursor).collect();
    println!("the reader read {} events ({} failed reads during the switch)", seen.len(), read.failures);
    assert_eq!(seen.len(), all.len(), "the reader read each event once and missed none");
    assert_eq!(seen, all, "the reader read the log in its order");
    let after = read_all(&read.store, *before).await;
    let later: Vec<Cursor> =
        read.all.iter().filter(|e| e.recorded_at > stopped_at).map(RecordedEvent::cursor).collect();
    assert!(!later.is_empty(), "events written after the switch");
    let from_before: BTreeSet<Cursor> = after.iter().map(RecordedEvent::cursor).collect();
    for c in &later {
        assert!(from_before.contains(c), "{c} written after the switch is not after the cursor {before}");
    }
    println!(
        "{} events after the cursor {before} taken before the switch, {} written after it",
        after.len(),
        later.len()
    );
}
