//! `berth plugin check`: drives a plugin through every action of the
//! protocol, over the same drivers Berth calls it with, and says of each
//! check whether it passed. No database: the payloads are made up here as
//! the manager would make them, for a lease that never existed.
//!
//! The checks: validate accepts a good reservation and answers a resource
//! request Berth would accept; it refuses bad ones (an unknown parameter, a
//! value of the wrong type for each parameter) as a refusal, not as a
//! failure worth retrying; each hook of a lease's life acts, and acts once:
//! the same key again answers the same and, where the plugin reports its
//! state (the optional `state` action), changes nothing; a call cut off at
//! its timeout, as when the plugin answers too slowly, is retried with the
//! same key and succeeds, once; every call answers within the timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::driver::Driver;
use crate::external::{hook_payload, validate_payload};
use crate::plugin::{Hook, HookError, ResourceRequest};
use crate::protocol::{self, HOOKS, STATE};

/// What to check the plugin with.
#[derive(Debug, Clone)]
pub struct Options {
    pub resource_type: String,
    /// A reservation the plugin must accept: its parameters.
    pub reservation: Value,
    /// Reservations it must refuse, besides those made from the good one.
    pub bad_reservations: Vec<Value>,
    /// The time a call may take, as the driver's `timeout_ms`.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub verdict: Verdict,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (word, note) = match &self.verdict {
            Verdict::Pass(n) => ("ok  ", n),
            Verdict::Fail(n) => ("FAIL", n),
            Verdict::Skip(n) => ("skip", n),
        };
        if note.is_empty() {
            write!(f, "{word} {}", self.name)
        } else {
            write!(f, "{word} {}: {note}", self.name)
        }
    }
}

/// The driver under test, built with a given time limit per call.
pub type MakeDriver<'a> = &'a (dyn Fn(Duration) -> Result<Arc<dyn Driver>, String> + Sync);

/// Every check's outcome, in order.
#[derive(Debug, Default)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    pub fn failed(&self) -> usize {
        self.checks.iter().filter(|c| matches!(c.verdict, Verdict::Fail(_))).count()
    }

    pub fn summary(&self) -> String {
        let passed = self.checks.iter().filter(|c| matches!(c.verdict, Verdict::Pass(_))).count();
        let skipped = self.checks.iter().filter(|c| matches!(c.verdict, Verdict::Skip(_))).count();
        format!("{} checks: {passed} passed, {} failed, {skipped} skipped", self.checks.len(), self.failed())
    }
}

/// An answer or a value as a message quotes it: long ones cut.
fn quote(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

fn failure(e: &HookError) -> String {
    if e.permanent {
        format!("refused (exit 2 or a 4xx): {}", e.message)
    } else {
        format!("failed (Berth would retry): {}", e.message)
    }
}

/// One run of the checks.
struct Run<'a> {
    driver: Arc<dyn Driver>,
    make: MakeDriver<'a>,
    opts: &'a Options,
    report: Report,
    on_check: &'a mut (dyn FnMut(&Check) + Send),
    /// The slowest call so far, and the calls that ran out of time.
    slowest: (Duration, String),
    timed_out: Vec<String>,
    /// Whether the plugin answers `state`.
    has_state: Option<bool>,
    lease: Value,
}

impl Run<'_> {
    fn record(&mut self, name: impl Into<String>, verdict: Verdict) {
        let check = Check { name: name.into(), verdict };
        (self.on_check)(&check);
        self.report.checks.push(check);
    }

    async fn call(&mut self, action: &str, payload: &Value, key: &str) -> Result<Value, HookError> {
        let driver = self.driver.clone();
        // Beyond the driver's own limit, so that even a driver that keeps
        // none cannot hang the run.
        let limit = self.opts.timeout.saturating_add(Duration::from_secs(2));
        let started = Instant::now();
        let answer = tokio::time::timeout(limit, driver.call(action, payload, key))
            .await
            .unwrap_or_else(|_| Err(HookError::retryable(format!("no answer within {} ms", limit.as_millis()))));
        let took = started.elapsed();
        if took > self.slowest.0 {
            self.slowest = (took, action.to_string());
        }
        if matches!(&answer, Err(e) if e.message.contains("no answer within")) {
            self.timed_out.push(action.to_string());
        }
        answer
    }

    /// The plugin's state, when it reports one.
    async fn state(&mut self) -> Option<Value> {
        if self.has_state == Some(false) {
            return None;
        }
        let payload = json!({"resource_type": self.opts.resource_type});
        let answer = self.call(STATE, &payload, &format!("state:{}", Uuid::new_v4())).await;
        if self.has_state.is_none() {
            self.has_state = Some(answer.is_ok());
        }
        answer.ok()
    }
}

/// Runs every check; `on_check` sees each as it is decided.
pub async fn run(make: MakeDriver<'_>, opts: &Options, on_check: &mut (dyn FnMut(&Check) + Send)) -> Report {
    let driver = match make(opts.timeout) {
        Ok(d) => d,
        Err(e) => {
            let check = Check { name: "the driver can be built".into(), verdict: Verdict::Fail(e) };
            on_check(&check);
            return Report { checks: vec![check] };
        }
    };
    let lease = json!({
        "id": Uuid::new_v4(), "name": "berth-plugin-check", "project_id": "check-project",
        "user_id": "check-user", "start_date": "2031-01-01T09:00:00.000000",
        "end_date": "2031-01-01T17:00:00.000000", "status": "ACTIVE",
    });
    let mut r = Run {
        driver,
        make,
        opts,
        report: Report::default(),
        on_check,
        slowest: (Duration::ZERO, String::new()),
        timed_out: Vec::new(),
        has_state: None,
        lease,
    };
    let request = validate_good(&mut r).await;
    validate_bad(&mut r).await;
    let allocations = allocations(request.as_ref().unwrap_or(&ResourceRequest::Nothing));
    let first_start = lifecycle(&mut r, &allocations).await;
    cut_off(&mut r, &allocations, first_start).await;
    timing(&mut r);
    r.report
}

async fn validate_good(r: &mut Run<'_>) -> Option<ResourceRequest> {
    let payload = validate_payload(&r.opts.resource_type, &r.opts.reservation);
    let key = format!("validate:{}", Uuid::new_v4());
    let name = format!("validate accepts a good reservation {}", quote(&r.opts.reservation));
    match r.call("validate", &payload, &key).await {
        Err(e) => {
            r.record(name, Verdict::Fail(failure(&e)));
            r.record("validate answers a resource request", Verdict::Skip("validate did not answer".into()));
            None
        }
        Ok(answer) => {
            r.record(name, Verdict::Pass(String::new()));
            match protocol::read_validate_answer(&answer) {
                Ok(request) => {
                    r.record("validate answers a resource request", Verdict::Pass(quote(&answer)));
                    Some(request)
                }
                Err(e) => {
                    r.record(
                        "validate answers a resource request",
                        Verdict::Fail(format!("{e} (it answered {})", quote(&answer))),
                    );
                    None
                }
            }
        }
    }
}

/// The good reservation with an unknown parameter, and with each of its
/// parameters of a type no parameter has; then those given.
fn bad_reservations(opts: &Options) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let good = opts.reservation.as_object().cloned().unwrap_or_default();
    let mut unknown = good.clone();
    unknown.insert("berth_check_unknown".into(), json!(true));
    out.push(("an unknown parameter".to_string(), Value::Object(unknown)));
    for key in good.keys() {
        let mut wrong = good.clone();
        wrong.insert(key.clone(), json!({"berth_check": "a value of the wrong type"}));
        out.push((format!("a wrong type for {key}"), Value::Object(wrong)));
    }
    for bad in &opts.bad_reservations {
        out.push((quote(bad), bad.clone()));
    }
    out
}

async fn validate_bad(r: &mut Run<'_>) {
    for (what, reservation) in bad_reservations(r.opts) {
        let payload = validate_payload(&r.opts.resource_type, &reservation);
        let key = format!("validate:{}", Uuid::new_v4());
        let name = format!("validate refuses {what}");
        let verdict = match r.call("validate", &payload, &key).await {
            Ok(answer) => Verdict::Fail(format!("it accepted {} (answered {})", quote(&reservation), quote(&answer))),
            Err(e) if !e.permanent => Verdict::Fail(format!(
                "{}; a bad reservation is refused: exit 2 (exec) or a 4xx (webhook), with {{\"error\": \"why\"}}",
                failure(&e)
            )),
            Err(e) if e.message.starts_with("no message") => {
                Verdict::Fail(format!("refused without saying why ({}); answer {{\"error\": \"why\"}}", e.message))
            }
            Err(e) => Verdict::Pass(e.message),
        };
        r.record(name, verdict);
    }
}

/// What a reservation of `request` would hold: made-up hosts.
fn allocations(request: &ResourceRequest) -> Vec<Value> {
    let slot = |i: u32, resources: Value| {
        json!({"resource_provider": {"uuid": Uuid::new_v4(), "name": format!("check-host-{i}")},
               "consumer_id": Uuid::new_v4(), "resources": resources})
    };
    match request {
        ResourceRequest::Nothing => Vec::new(),
        ResourceRequest::Slots { amount, resources, .. } => {
            (1..=(*amount).min(16)).map(|i| slot(i, json!(resources))).collect()
        }
        ResourceRequest::Hosts { min, .. } => (1..=(*min).min(16)).map(|i| slot(i, json!({}))).collect(),
    }
}

fn hook(
    r: &Run<'_>,
    reservation: &Value,
    allocations: &[Value],
    event_type: &str,
    attempt: u32,
) -> Result<Value, HookError> {
    let hook = Hook {
        event_type: event_type.to_string(),
        idempotency_key: format!(
            "{}:{}:{}",
            r.lease["id"].as_str().unwrap_or_default(),
            event_type,
            reservation["id"].as_str().unwrap_or_default()
        ),
        attempt,
        lease: r.lease.clone(),
        reservation: reservation.clone(),
        allocations: allocations.to_vec(),
    };
    hook_payload(&r.opts.resource_type, &hook)
}

/// A reservation of the lease as hooks see it: its parameters with its id,
/// type, pool and status.
fn reservation(r: &Run<'_>, status: &str) -> Value {
    let mut o = r.opts.reservation.as_object().cloned().unwrap_or_default();
    o.insert("id".into(), json!(Uuid::new_v4()));
    o.insert("lease_id".into(), r.lease["id"].clone());
    o.insert("resource_type".into(), json!(r.opts.resource_type));
    o.insert("resource_id".into(), json!(Uuid::new_v4()));
    o.insert("status".into(), json!(status));
    Value::Object(o)
}

/// One hook action with its payload's key; `Err` is the check's failure.
async fn act(r: &mut Run<'_>, action: &str, payload: &Value) -> Result<Value, String> {
    let key = payload["idempotency_key"].as_str().unwrap_or_default().to_string();
    r.call(action, payload, &key).await.map_err(|e| failure(&e))
}

/// The same key again: the same answer, and no change to the state.
async fn repeat(r: &mut Run<'_>, action: &str, again: &Value, first: &Value, what: &str) {
    let before = r.state().await;
    let name = format!("{action} {what} answers the same");
    match act(r, action, again).await {
        Err(e) => r.record(name, Verdict::Fail(e)),
        Ok(answer) if &answer != first => {
            r.record(name, Verdict::Fail(format!("first {}, then {}", quote(first), quote(&answer))))
        }
        Ok(_) => r.record(name, Verdict::Pass(String::new())),
    }
    let name = format!("{action} {what} applies nothing twice");
    match (before, r.state().await) {
        (Some(before), Some(after)) if before != after => {
            r.record(name, Verdict::Fail(format!("the state changed from {} to {}", quote(&before), quote(&after))))
        }
        (Some(_), Some(_)) => r.record(name, Verdict::Pass(String::new())),
        _ => r.record(name, Verdict::Skip("the plugin reports no state (it does not answer the state action)".into())),
    }
}

/// A lease's life: each hook in order, each repeated with its key. Answers
/// how long the first on_start took.
async fn lifecycle(r: &mut Run<'_>, allocations: &[Value]) -> Duration {
    let reservation = reservation(r, "active");
    let mut first_start = Duration::from_millis(2);
    for (action, event_type) in HOOKS {
        let payload = match hook(r, &reservation, allocations, event_type, 1) {
            Ok(p) => p,
            Err(e) => {
                r.record(format!("{action} acts"), Verdict::Fail(e.message));
                continue;
            }
        };
        let started = Instant::now();
        let first = act(r, action, &payload).await;
        if action == "on_start" {
            first_start = started.elapsed();
        }
        match first {
            Err(e) => r.record(format!("{action} acts"), Verdict::Fail(e)),
            Ok(answer) => {
                r.record(format!("{action} acts"), Verdict::Pass(quote(&answer)));
                if let Ok(again) = hook(r, &reservation, allocations, event_type, 2) {
                    repeat(r, action, &again, &answer, "repeated with the same key").await;
                }
            }
        }
    }
    first_start
}

/// on_start cut off before it answers (half the time it took before), then
/// retried with the same key as the manager would: it must succeed, once.
async fn cut_off(r: &mut Run<'_>, allocations: &[Value], took: Duration) {
    let name = "on_start retried after a call cut off at its timeout succeeds";
    let reservation = reservation(r, "active");
    let limit = (took / 2).max(Duration::from_millis(1));
    let (Ok(first), Ok(retry)) =
        (hook(r, &reservation, allocations, "start_lease", 1), hook(r, &reservation, allocations, "start_lease", 2))
    else {
        return r.record(name, Verdict::Fail("the payload could not be made".into()));
    };
    let short = match (r.make)(limit) {
        Ok(d) => d,
        Err(e) => return r.record(name, Verdict::Fail(format!("a driver with a {} ms limit: {e}", limit.as_millis()))),
    };
    let key = first["idempotency_key"].as_str().unwrap_or_default().to_string();
    // Not counted as a slow answer: the cut is the check's own doing.
    let cut = tokio::time::timeout(limit, short.call("on_start", &first, &key)).await;
    let how = if matches!(cut, Ok(Ok(_))) { "it answered before the cut anyway" } else { "cut off" };
    match act(r, "on_start", &retry).await {
        Err(e) => r.record(name, Verdict::Fail(format!("{how}; then the retry {e}"))),
        Ok(answer) => {
            r.record(name, Verdict::Pass(format!("{how} after {} ms", limit.as_millis())));
            repeat(r, "on_start", &retry, &answer, "retried once more").await;
        }
    }
    // The reservation's end, so the plugin gives back what it took.
    if let Ok(end) = hook(r, &reservation, allocations, "end_lease", 1) {
        let _ = act(r, "on_end", &end).await;
    }
}

fn timing(r: &mut Run<'_>) {
    let limit = r.opts.timeout.as_millis();
    let name = format!("every call answers within {limit} ms");
    if r.timed_out.is_empty() {
        let (took, action) = r.slowest.clone();
        r.record(name, Verdict::Pass(format!("the slowest, {action}, took {} ms", took.as_millis())));
    } else {
        let calls = r.timed_out.join(", ");
        r.record(
            name,
            Verdict::Fail(format!("no answer in time to: {calls}; Berth kills it and retries, and a lease waits")),
        );
    }
}
