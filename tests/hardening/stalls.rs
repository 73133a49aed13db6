//! A database that stalls with requests in flight: each request is answered
//! within the deadline (`statement_timeout_ms` and a second) and a second,
//! 503 with `Retry-After`, and its retry with the same consumer generation
//! or Idempotency-Key leaves exactly one effect. Without the deadline, each
//! waits out the request timeout (a minute here).

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::Method;
use uuid::Uuid;

use super::proxy::{behind_proxy, Link};
use super::*;

const CONFIG: &str = "statement_timeout_ms = 3000\nconnect_timeout_ms = 2000\npool_wait_timeout_ms = 2000\n\
                      [api]\nrequest_timeout_s = 60\n";
/// The statement timeout above, and the deadline: a second more.
const STATEMENT_TIMEOUT: Duration = Duration::from_millis(3000);
const DEADLINE: Duration = Duration::from_millis(4000);
/// The longest a request may wait for its answer: the deadline and a second.
const ANSWERED_WITHIN: Duration = Duration::from_millis(5000);

/// One request as a client sends it, the first time and on retry.
#[derive(Clone)]
struct Call {
    what: &'static str,
    method: Method,
    path: String,
    key: Option<&'static str>,
    body: Option<Value>,
}

impl Call {
    fn write(&self) -> bool {
        self.method != Method::GET
    }
}

/// An answer (no status: none came) and how long it took.
struct Answer {
    status: Option<StatusCode>,
    headers: HeaderMap,
    body: Value,
    took: Duration,
}

async fn send(base: String, call: Call) -> Answer {
    let started = Instant::now();
    let mut req = reqwest::Client::new()
        .request(call.method.clone(), format!("{base}{}", call.path))
        .header("x-auth-token", ADMIN)
        // Well past the deadline, well short of the request timeout.
        .timeout(ANSWERED_WITHIN + Duration::from_secs(5));
    if call.path.starts_with("/placement") {
        req = req.header("openstack-api-version", "placement 1.28");
    }
    if let Some(key) = call.key {
        req = req.header("idempotency-key", key);
    }
    if let Some(body) = &call.body {
        req = req.json(body);
    }
    let Ok(resp) = req.send().await else {
        return Answer { status: None, headers: HeaderMap::new(), body: Value::Null, took: started.elapsed() };
    };
    let (status, headers) = (resp.status(), resp.headers().clone());
    let body = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null);
    Answer { status: Some(status), headers, body, took: started.elapsed() }
}

/// Sends every call at once; their answers, in order.
fn send_all(s: &Server, calls: &[Call]) -> Vec<tokio::task::JoinHandle<Answer>> {
    calls.iter().map(|c| tokio::spawn(send(s.url.clone(), c.clone()))).collect()
}

/// Each consumer's claim body: `vcpus` on `rp`, at `generation`.
fn claim(rp: &str, vcpus: i64, generation: Option<i64>) -> Value {
    json!({"allocations": {rp: {"resources": {"VCPU": vcpus}}}, "project_id": "p", "user_id": "u",
           "consumer_generation": generation})
}

/// What the tests stall: claims (a new consumer, one it holds already
/// at generation 1, two at once), lease creations with their keys, and
/// reads. The consumers' generations and VCPUs once each write is made.
struct Plan {
    calls: Vec<Call>,
    consumers: Vec<(Uuid, i64, i64)>,
    leases: Vec<&'static str>,
}

/// A provider, a host, and consumer `held` holding one VCPU; the plan.
async fn prepare(s: &Server, leases: &[(&'static str, i64)], reads: bool) -> Plan {
    let (st, rp) = s.post("/placement/resource_providers", ADMIN, json!({"name": "rp"})).await;
    assert!(st.is_success(), "{rp}");
    let (_, rps) = s.get("/placement/resource_providers?name=rp", ADMIN).await;
    let rp = rps["resource_providers"][0]["uuid"].as_str().unwrap().to_string();
    let inv = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 64}}});
    let (st, body) = s.put(&format!("/placement/resource_providers/{rp}/inventories"), ADMIN, inv).await;
    assert!(st.is_success(), "{body}");
    enrol(s, "h1").await;
    let [new, held, one, two] = [0; 4].map(|_| Uuid::new_v4());
    let held_path = format!("/allocations/{held}");
    let (st, body) = s.placement(Method::PUT, &held_path, ADMIN, "1.28", claim(&rp, 1, None)).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{body}");
    let call = |what, method, path: String, key, body| Call { what, method, path, key, body };
    let mut calls = vec![
        call("a claim", Method::PUT, format!("/placement/allocations/{new}"), None, Some(claim(&rp, 1, None))),
        call("a claim's change", Method::PUT, format!("/placement{held_path}"), None, Some(claim(&rp, 2, Some(1)))),
        call(
            "a claim of two",
            Method::POST,
            "/placement/allocations".into(),
            None,
            Some(json!({one.to_string(): claim(&rp, 1, None), two.to_string(): claim(&rp, 1, None)})),
        ),
    ];
    for (name, h) in leases {
        let body = host_lease(name, &at(*h), &at(h + 1));
        calls.push(call("a lease", Method::POST, "/v1/leases".into(), Some(*name), Some(body)));
    }
    if reads {
        calls.push(call("a list", Method::GET, "/v1/leases".into(), None, None));
        calls.push(call("a claim's read", Method::GET, format!("/placement{held_path}"), None, None));
    }
    let consumers = vec![(new, 1, 1), (held, 2, 2), (one, 1, 1), (two, 1, 1)];
    Plan { calls, consumers, leases: leases.iter().map(|(n, _)| *n).collect() }
}

/// Each answer is the server's, in time: 503 with `Retry-After`, and for a
/// write either nothing was made (`berth.unavailable`) or it may have been
/// (`berth.outcome_unknown`). Answers each call's code.
async fn answered_in_time(calls: &[Call], answers: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<String> {
    let mut codes = Vec::new();
    for (call, answer) in calls.iter().zip(answers) {
        let Answer { status, headers, body, took } = answer.await.unwrap();
        let what = call.what;
        assert_eq!(status, Some(StatusCode::SERVICE_UNAVAILABLE), "{what}: {body} after {took:?}");
        assert!(took <= ANSWERED_WITHIN, "{what} answered after {took:?}: {body}");
        assert!(headers.contains_key("retry-after"), "{what}: {body}");
        let code = code_of(&body).to_string();
        let codes_allowed: &[&str] =
            if call.write() { &["berth.unavailable", "berth.outcome_unknown"] } else { &["berth.unavailable"] };
        assert!(codes_allowed.contains(&code.as_str()), "{what}: {body}");
        codes.push(code);
    }
    codes
}

/// Sends each write again as a client does after a 503 (as often as it
/// is answered 503), then once more. A lease creation is answered as made
/// by its key (the second says so, the first too where the first request's
/// were `made` already); a claim sent after it was made is refused 409 as
/// Placement refuses a stale generation, saying it was made (the second
/// always). Then exactly one effect of each, read from the database.
async fn retried_once_each(s: &Server, plan: &Plan, made: bool) {
    for call in plan.calls.iter().filter(|c| c.write()) {
        let mut again = send(s.url.clone(), call.clone()).await;
        for _ in 0..20 {
            if again.status != Some(StatusCode::SERVICE_UNAVAILABLE) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            again = send(s.url.clone(), call.clone()).await;
        }
        let twice = send(s.url.clone(), call.clone()).await;
        for (a, n) in [(&again, "retried"), (&twice, "retried twice")] {
            // A claim made already is refused as Placement refuses a stale
            // generation, and the refusal says it was made.
            let said_made = a.status == Some(StatusCode::CONFLICT)
                && a.body["errors"][0]["code"] == "placement.concurrent_update"
                && a.body["errors"][0]["detail"].as_str().is_some_and(|d| d.contains("this request was made"));
            let ok = a.status.is_some_and(|s| s.is_success()) || (call.key.is_none() && said_made);
            assert!(ok, "{} {n}: {:?} {}", call.what, a.status, a.body);
        }
        if call.key.is_none() {
            assert!(twice.status == Some(StatusCode::CONFLICT), "{}: sent twice, made once: {}", call.what, twice.body);
        }
        if call.key.is_some() {
            let replayed = |a: &Answer| a.headers.get("idempotent-replayed").is_some_and(|v| v == "true");
            assert!(replayed(&twice) && (replayed(&again) || !made), "{}", call.what);
            assert_eq!(twice.body["lease"]["id"], again.body["lease"]["id"], "the first lease");
        }
    }
    let (db, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    for (consumer, generation, vcpus) in &plan.consumers {
        let row = db
            .query_one(
                "SELECT c.generation, sum(a.used)::int8 FROM consumers c JOIN allocations a ON a.consumer_uuid = c.uuid
                 WHERE c.uuid = $1 GROUP BY c.generation",
                &[consumer],
            )
            .await
            .unwrap();
        assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (*generation, *vcpus), "consumer {consumer}");
    }
    for name in &plan.leases {
        let row = db.query_one("SELECT count(*) FROM leases WHERE name = $1", &[name]).await.unwrap();
        assert_eq!(row.get::<_, i64>(0), 1, "leases named {name}");
    }
}

/// Until the database answers through the proxy again.
async fn until_back(s: &Server) {
    for _ in 0..100 {
        if s.get("/v1/leases", ALICE).await.0 == StatusCode::OK {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the database did not come back");
}

#[tokio::test]
async fn requests_whose_statements_were_sent_to_a_stalled_database_are_answered_by_the_deadline() {
    let (s, proxy) = behind_proxy(CONFIG, &[("BERTH_POOL_SIZE", "16")]).await;
    let plan = prepare(&s, &[("stall-a", 1), ("stall-b", 3)], true).await;
    // The statements wait at the server, behind a lock of the test's,
    // until the link goes silent: they were sent, and their answers are lost.
    let (locker, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    locker.batch_execute("BEGIN; LOCK TABLE consumers, leases, request_keys IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let sent = Instant::now();
    let answers = send_all(&s, &plan.calls);
    // The reads, the leases, and the first claims' batch (the others
    // queue behind it for their provider).
    // Watched from outside the locker's transaction, which sees the
    // server's activity as it was when it first looked.
    let (watcher, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let waiting =
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    while watcher.query_one(waiting, &[]).await.unwrap().get::<_, i64>(0) < 5 {
        assert!(sent.elapsed() < STATEMENT_TIMEOUT / 2, "the requests did not reach the database in time");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.set(Link::Silent);
    assert!(sent.elapsed() < STATEMENT_TIMEOUT, "the server timed the statements out before the link went silent");
    locker.batch_execute("ROLLBACK").await.unwrap();
    answered_in_time(&plan.calls, answers).await;
    proxy.set(Link::Up);
    until_back(&s).await;
    retried_once_each(&s, &plan, false).await;
    s.assert_no_panic();
}

#[tokio::test]
async fn writes_whose_commit_answer_is_lost_are_answered_outcome_unknown_and_retried_safely() {
    let (s, proxy) = behind_proxy(CONFIG, &[("BERTH_POOL_SIZE", "16")]).await;
    let plan = prepare(&s, &[("lost-a", 1)], false).await;
    proxy.set(Link::LoseCommitAnswers);
    let codes = answered_in_time(&plan.calls, send_all(&s, &plan.calls)).await;
    let lease = plan.calls.iter().position(|c| c.key.is_some()).unwrap();
    assert_eq!(codes[lease], "berth.outcome_unknown", "the lease's COMMIT went unanswered");
    assert!(codes.iter().filter(|c| *c == "berth.outcome_unknown").count() >= 2, "{codes:?}");
    // It was made all the same: its retry must say so, not make another.
    let (db, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let made = db.query_one("SELECT count(*) FROM leases WHERE name = 'lost-a'", &[]).await.unwrap();
    assert_eq!(made.get::<_, i64>(0), 1, "the COMMIT reached the server");
    proxy.set(Link::Up);
    until_back(&s).await;
    retried_once_each(&s, &plan, true).await;
    s.assert_no_panic();
}

#[test]
fn the_deadline_is_the_statement_timeout_and_a_second() {
    assert_eq!(DEADLINE, STATEMENT_TIMEOUT + berth_store::DEADLINE_MARGIN);
    assert_eq!(ANSWERED_WITHIN, DEADLINE + Duration::from_secs(1));
}
