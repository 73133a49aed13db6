//! Blazar's refusals of malformed bodies, word for word: each body type
//! reads its request, and a body it cannot read is refused with the
//! status, code and message clients have always been given.

use reqwest::Method;

use super::*;

/// A refusal: the status, the Berth code and Blazar's `error_message`.
type Refusal = (StatusCode, &'static str, String);

const LEASE: &str = "berth.lease.invalid";
const DATE: &str = "berth.lease.invalid_date";
const INVALID: &str = "berth.invalid";
const HOST: &str = "berth.host.invalid";
const MAINT: &str = "berth.maintenance.invalid";
const OFFER: &str = "berth.offer.invalid";

/// A malformed body: the method, path and caller, the body, and its refusal.
type Case = (Method, String, &'static str, Value, Refusal);

/// What the cases refer to: a lease body to spoil, dates, a lease and a host.
struct World {
    base: Value,
    start: String,
    end: String,
    later: String,
    lease: String,
    host: String,
    host_id: String,
}

const DUR: &str = "must be seconds or a string like \"2h\"";

/// Creating a lease with `body`, refused as `r`.
fn new_lease(body: Value, r: Refusal) -> Case {
    (Method::POST, "/v1/leases".into(), ALICE, body, r)
}

fn with(base: &Value, k: &str, v: Value) -> Value {
    let mut b = base.clone();
    b[k] = v;
    b
}

fn without(base: &Value, k: &str) -> Value {
    let mut b = base.clone();
    b.as_object_mut().unwrap().remove(k);
    b
}

fn rec(base: &Value, r: Value) -> Value {
    let mut b = without(base, "end_date");
    b["recurrence"] = r;
    b
}

fn no(code: &'static str, message: &str) -> Refusal {
    (StatusCode::BAD_REQUEST, code, message.to_string())
}

#[tokio::test]
async fn malformed_blazar_bodies_keep_their_wording() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let (st, lease) = s.post("/v1/leases", ALICE, host_lease("l", &at(1), &at(2))).await;
    assert_eq!(st, StatusCode::CREATED, "{lease}");
    let lease = format!("/v1/leases/{}", lease["lease"]["id"].as_str().unwrap());
    let (_, listed) = s.get("/v1/os-hosts", ADMIN).await;
    let host_id = listed["hosts"][0]["id"].as_str().unwrap().to_string();
    let host = format!("/v1/os-hosts/{host_id}");
    let before = log_length(&s).await;

    let (start, end, later) = (at(1), at(2), at(48));
    let w = World { base: host_lease("x", &start, &end), start, end, later, lease, host, host_id };
    let cases: Vec<Case> = [create(&w), recurring(&w), change(&w), advice(&w), hosts(&w), maintenance(&w)].concat();
    let mut wrong = Vec::new();
    for (method, path, token, body, want) in cases {
        let (st, e) = s.call(method.clone(), &path, token, Some(body.clone())).await;
        let got =
            (st, e["code"].as_str().unwrap_or("").to_string(), e["error_message"].as_str().unwrap_or("").to_string());
        if (got.0, got.1.as_str(), got.2.as_str()) != (want.0, want.1, want.2.as_str()) {
            wrong.push(format!("{method} {path} {body}\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} refusals changed:\n{}", wrong.len(), wrong.join("\n"));
    assert_eq!(log_length(&s).await, before, "a refused request wrote to the log");
    s.assert_no_panic();
}

/// Creating a lease.
fn create(w: &World) -> Vec<Case> {
    let World { base, start, end, later, lease, host, host_id } = w;
    let _ = (base, start, end, later, lease, host, host_id);
    vec![
        new_lease(json!("\"x\""), no(LEASE, "the body must be a JSON object")),
        new_lease(with(base, "name", json!(5)), no(LEASE, "name must be a string, not 5")),
        new_lease(without(base, "name"), no(LEASE, "name is required")),
        new_lease(with(base, "name", Value::Null), no(LEASE, "name is required")),
        new_lease(json!({ "lease": with(base, "name", json!(5)) }), no(LEASE, "name must be a string, not 5")),
        new_lease(with(base, "dry_run", json!("yes")), no(LEASE, "dry_run must be true or false, not \"yes\"")),
        new_lease(with(base, "start_date", json!(5)), no(LEASE, "start_date must be a string, not 5")),
        new_lease(with(base, "end_date", json!(true)), no(LEASE, "end_date must be a string, not true")),
        new_lease(with(base, "before_end_date", json!([1])), no(LEASE, "before_end_date must be a string, not [1]")),
        new_lease(without(base, "end_date"), no(DATE, "end_date is required")),
    ]
}

/// A lease's reservations and recurrence.
fn recurring(w: &World) -> Vec<Case> {
    let World { base, later, .. } = w;
    vec![
        new_lease(with(base, "reservations", json!("x")), no(LEASE, "reservations must be a list")),
        new_lease(with(base, "reservations", json!([5])), no(LEASE, "reservation 0 is not an object")),
        new_lease(with(base, "reservations", json!([{"min": 1}])), no(LEASE, "reservation 0 needs a resource_type")),
        new_lease(
            with(base, "reservations", json!([{"resource_type": null}])),
            no(LEASE, "reservation 0 needs a resource_type"),
        ),
        new_lease(
            with(base, "reservations", json!([{"resource_type": 5}])),
            no(LEASE, "resource_type must be a string, not 5"),
        ),
        new_lease(
            rec(base, json!(5)),
            no(LEASE, "recurrence: must be an object with cron, duration, until and optionally time_zone"),
        ),
        new_lease(rec(base, json!({})), no(LEASE, "recurrence: cron is required")),
        new_lease(
            rec(base, json!({"cron": 5, "duration": "1h", "until": later})),
            no(LEASE, "cron must be a string, not 5"),
        ),
        new_lease(
            rec(base, json!({"cron": "0 9 * * *", "until": later})),
            no(INVALID, &format!("recurrence.duration {DUR}")),
        ),
        new_lease(
            rec(base, json!({"cron": "0 9 * * *", "duration": [1], "until": later})),
            no(INVALID, &format!("recurrence.duration {DUR}")),
        ),
        new_lease(
            rec(base, json!({"cron": "0 9 * * *", "duration": "1h"})),
            no(LEASE, "recurrence: until (a date) is required"),
        ),
        new_lease(
            rec(base, json!({"cron": "0 9 * * *", "duration": "1h", "until": 5})),
            no(LEASE, "until must be a string, not 5"),
        ),
    ]
}

/// Changing one.
fn change(w: &World) -> Vec<Case> {
    let World { base, start, end, later, lease, host, host_id } = w;
    let _ = (base, start, end, later, lease, host, host_id);
    vec![
        (Method::PUT, lease.clone(), ALICE, json!({}), no(LEASE, "nothing to update")),
        (Method::PUT, lease.clone(), ALICE, json!({"defer_by": null}), no(LEASE, "nothing to update")),
        (Method::PUT, lease.clone(), ALICE, json!({"name": 5}), no(LEASE, "name must be a string, not 5")),
        (Method::PUT, lease.clone(), ALICE, json!({"end_date": 5}), no(LEASE, "end_date must be a string, not 5")),
        (Method::PUT, lease.clone(), ALICE, json!({"prolong_for": [1]}), no(INVALID, &format!("prolong_for {DUR}"))),
        (Method::PUT, lease.clone(), ALICE, json!({"reservations": 5}), no(LEASE, "reservations must be a list")),
        (Method::PUT, lease.clone(), ALICE, json!({"reservations": [5]}), no(LEASE, "reservation 0 is not an object")),
        (
            Method::PUT,
            lease.clone(),
            ALICE,
            json!({"reservations": [{"min": 1}]}),
            no(LEASE, "reservation 0 needs the id of one of the lease's reservations"),
        ),
        (
            Method::PUT,
            lease.clone(),
            ALICE,
            json!({"reservations": [{"id": "nope"}]}),
            no(LEASE, "reservation 0 needs the id of one of the lease's reservations"),
        ),
        (
            Method::PUT,
            lease.clone(),
            ALICE,
            json!({"reservations": [{"id": 5}]}),
            no(LEASE, "id must be a string, not 5"),
        ),
        (
            Method::PUT,
            "/v1/leases/6f1f2f6a-0000-4000-8000-000000000009".into(),
            ALICE,
            json!({"name": 5}),
            (
                StatusCode::NOT_FOUND,
                "berth.lease.not_found",
                "lease 6f1f2f6a-0000-4000-8000-000000000009 could not be found".into(),
            ),
        ),
    ]
}

/// Advice.
fn advice(w: &World) -> Vec<Case> {
    let World { base, start, end, later, lease, host, host_id } = w;
    let _ = (base, start, end, later, lease, host, host_id);
    vec![
        (
            Method::POST,
            "/v1/availability".into(),
            ALICE,
            json!({"reservations": "x", "duration": "1h"}),
            no(LEASE, "reservations must be a list"),
        ),
        (
            Method::POST,
            "/v1/availability".into(),
            ALICE,
            json!({"reservations": []}),
            no(INVALID, &format!("duration {DUR}")),
        ),
        (
            Method::POST,
            "/v1/availability".into(),
            ALICE,
            json!({"reservations": [], "duration": "1h", "limit": 0}),
            no(LEASE, "limit must be 1 to 100"),
        ),
        (
            Method::POST,
            "/v1/availability".into(),
            ALICE,
            json!({"reservations": [], "duration": "1h", "limit": "x"}),
            no(LEASE, "limit must be 1 to 100"),
        ),
        (
            Method::POST,
            "/v1/availability".into(),
            ALICE,
            json!({"availability": {"reservations": [], "duration": "1h", "from": 5}}),
            no(LEASE, "from must be a string, not 5"),
        ),
        (Method::POST, "/v1/offers".into(), ALICE, json!({"reservations": "x", "duration": "1h"}), {
            no(LEASE, "reservations must be a list")
        }),
        (Method::POST, "/v1/offers".into(), ALICE, json!({"reservations": [], "duration": "1h", "limit": "x"}), {
            no(OFFER, "limit must be 1 to 100")
        }),
        (
            Method::POST,
            "/v1/offers".into(),
            ALICE,
            json!({"offers": {"reservations": [], "duration": "1h", "from": 5}}),
            { no(LEASE, "from must be a string, not 5") },
        ),
    ]
}

/// Hosts.
fn hosts(w: &World) -> Vec<Case> {
    let World { base, start, end, later, lease, host, host_id } = w;
    let _ = (base, start, end, later, lease, host, host_id);
    vec![
        // A body that is not JSON names serde's reason.
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!("{nope"),
            no(LEASE, "the body is not JSON: key must be a string at line 1 column 2"),
        ),
        (Method::POST, "/v1/os-hosts".into(), ADMIN, json!({}), no(HOST, "name (the provider's name) is required")),
        (Method::POST, "/v1/os-hosts".into(), ADMIN, json!({"name": 5}), no(LEASE, "name must be a string, not 5")),
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!({"name": "n", "vcpus": "x", "memory_mb": 1, "local_gb": 1}),
            no(HOST, "vcpus must be a whole number from 0 to 2147483647, not \"x\""),
        ),
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!({"name": "n", "vcpus": 1e20, "memory_mb": 1, "local_gb": 1}),
            no(HOST, "vcpus must be a whole number from 0 to 2147483647, not 1e+20"),
        ),
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!({"name": "n", "vcpus": 1, "memory_mb": 1.5, "local_gb": 1}),
            no(HOST, "memory_mb must be a whole number from 0 to 2147483647, not 1.5"),
        ),
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!({"host": {"name": "n", "vcpus": 1, "memory_mb": 1, "local_gb": true}}),
            no(HOST, "local_gb must be a whole number from 0 to 2147483647, not true"),
        ),
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!({"name": "n", "vcpus": 1}),
            no(HOST, "give all of vcpus, memory_mb and local_gb, or none"),
        ),
        (
            Method::POST,
            "/v1/os-hosts".into(),
            ADMIN,
            json!({"name": "n", "reservable": "maybe"}),
            no(HOST, "reservable must be true or false, not \"maybe\""),
        ),
        (Method::PUT, host.clone(), ADMIN, json!({}), no(HOST, "nothing to update")),
        (Method::PUT, host.clone(), ADMIN, json!({"disabled": 5}), no(HOST, "disabled must be true or false, not 5")),
        (Method::PUT, host.clone(), ADMIN, json!({"vcpus": 4}), no(HOST, "vcpus cannot be changed here")),
        (
            Method::PUT,
            host.clone(),
            ADMIN,
            json!({"values": {"reservable": "x"}}),
            no(HOST, "reservable must be true or false, not \"x\""),
        ),
        (
            Method::PATCH,
            "/v1/os-hosts/properties/gpu".into(),
            ADMIN,
            json!({}),
            no(HOST, "private (true or false) is required"),
        ),
        (
            Method::PATCH,
            "/v1/os-hosts/properties/gpu".into(),
            ADMIN,
            json!({"resource_property": {"private": "true"}}),
            no(HOST, "private (true or false) is required"),
        ),
    ]
}

/// Maintenance.
fn maintenance(w: &World) -> Vec<Case> {
    let World { base, start, end, later, lease, host, host_id } = w;
    let _ = (base, start, end, later, lease, host, host_id);
    vec![
        (Method::POST, "/v1/maintenance".into(), ADMIN, json!({}), no(MAINT, "hosts (a list of host ids) is required")),
        (
            Method::POST,
            "/v1/maintenance".into(),
            ADMIN,
            json!({"hosts": [], "start_date": start, "end_date": end}),
            no(MAINT, "hosts (a list of host ids) is required"),
        ),
        (
            Method::POST,
            "/v1/maintenance".into(),
            ADMIN,
            json!({"hosts": ["x"], "start_date": start, "end_date": end}),
            no(MAINT, "\"x\" is not a host id"),
        ),
        (
            Method::POST,
            "/v1/maintenance".into(),
            ADMIN,
            json!({"hosts": [host_id], "end_date": end}),
            no(MAINT, "start_date is required"),
        ),
        (
            Method::POST,
            "/v1/maintenance".into(),
            ADMIN,
            json!({"hosts": [host_id], "start_date": 5, "end_date": end}),
            no(LEASE, "start_date must be a string, not 5"),
        ),
        (
            Method::POST,
            "/v1/maintenance".into(),
            ADMIN,
            json!({"maintenance": {"hosts": [host_id], "start_date": start, "end_date": end, "heal": "x"}}),
            no(MAINT, "heal must be true or false, not \"x\""),
        ),
        (
            Method::POST,
            "/v1/maintenance".into(),
            ADMIN,
            json!({"hosts": [host_id], "start_date": start, "end_date": end, "reason": 5}),
            no(LEASE, "reason must be a string, not 5"),
        ),
    ]
}
