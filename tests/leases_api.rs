//! The Blazar v1 lease and host API, black box: a real berthd on a real
//! database, driven over HTTP.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use berth_testkit::{Server, ADMIN, ALICE, BOB};
use chrono::{DateTime, Duration, DurationRound, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// `h` hours after a future hour boundary, in Blazar's input format.
fn at(h: i64) -> String {
    let base: DateTime<Utc> = (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap();
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

async fn enrol(s: &Server, name: &str, extra: Value) -> String {
    let mut body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    host["host"]["id"].as_str().unwrap().to_string()
}

fn host_lease(name: &str, start: i64, end: i64, min: u32, max: u32, props: &str) -> Value {
    json!({
        "name": name, "start_date": at(start), "end_date": at(end),
        "reservations": [{"resource_type": "physical:host", "min": min, "max": max,
                          "hypervisor_properties": "", "resource_properties": props}],
        "events": []
    })
}

fn hosts_of(lease: &Value) -> Vec<String> {
    lease["lease"]["reservations"][0]["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["resource_id"].as_str().unwrap().to_string())
        .collect()
}

async fn lease_count(s: &Server) -> usize {
    let (st, body) = s.get("/v1/leases", ADMIN).await;
    assert_eq!(st, StatusCode::OK);
    body["leases"].as_array().unwrap().len()
}

#[tokio::test]
async fn the_only_host_with_a_property_is_taken_once_at_a_time() {
    let s = Server::start().await;
    let gpu = enrol(&s, "gpu-1", json!({"gpu": "true"})).await;
    enrol(&s, "plain-1", json!({})).await;
    let props = "[\"=\", \"$gpu\", \"true\"]";
    let (st, a) = s.post("/v1/leases", ALICE, host_lease("a", 1, 3, 1, 1, props)).await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    assert_eq!(hosts_of(&a), vec![gpu.clone()]);
    assert_eq!(a["lease"]["status"], "PENDING");
    let events: Vec<&str> =
        a["lease"]["events"].as_array().unwrap().iter().map(|e| e["event_type"].as_str().unwrap()).collect();
    assert_eq!(events, vec!["start_lease", "before_end_lease", "end_lease"]);
    assert!(a["lease"]["events"].as_array().unwrap().iter().all(|e| e["status"] == "UNDONE"));
    let (st, err) = s.post("/v1/leases", BOB, host_lease("b", 2, 4, 1, 1, props)).await;
    assert_eq!(st, StatusCode::CONFLICT, "{err}");
    assert_eq!(err["code"], "berth.lease.reservation_0.no_capacity");
    assert_eq!(err["error_code"], 409);
    assert!(err["error_message"].as_str().unwrap().contains("reservation 0"));
    assert!(err["request_id"].as_str().unwrap().starts_with("req-"));
    // Back to back, before and after.
    let (st, _) = s.post("/v1/leases", BOB, host_lease("c", 3, 5, 1, 1, props)).await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, _) = s.post("/v1/leases", BOB, host_lease("d", 0, 1, 1, 1, props)).await;
    assert_eq!(st, StatusCode::CREATED);
    // The host is held: it cannot leave the pool.
    let (st, err) = s.delete(&format!("/v1/os-hosts/{gpu}"), ADMIN).await;
    assert_eq!((st, err["code"].as_str()), (StatusCode::CONFLICT, Some("berth.host.in_use")));
    let (st, allocs) = s.get(&format!("/v1/os-hosts/{gpu}/allocation"), ADMIN).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(allocs["allocation"]["reservations"].as_array().unwrap().len(), 3);
    s.replay_verify();
}

#[tokio::test]
async fn min_and_max_take_as_many_hosts_as_are_free() {
    let s = Server::start().await;
    for i in 0..3 {
        enrol(&s, &format!("h{i}"), json!({})).await;
    }
    let (st, one) = s.post("/v1/leases", ALICE, host_lease("one", 1, 2, 1, 1, "")).await;
    assert_eq!(st, StatusCode::CREATED, "{one}");
    let (st, many) = s.post("/v1/leases", ALICE, host_lease("many", 1, 2, 1, 5, "")).await;
    assert_eq!(st, StatusCode::CREATED, "{many}");
    assert_eq!(hosts_of(&many).len(), 2);
    assert!(!hosts_of(&many).contains(&hosts_of(&one)[0]));
    let (st, err) = s.post("/v1/leases", ALICE, host_lease("none", 1, 2, 1, 1, "")).await;
    assert_eq!(st, StatusCode::CONFLICT, "{err}");
    // Instances share what is left over time.
    let inst = json!({"name": "vm", "start_date": at(2), "end_date": at(3), "reservations": [
        {"resource_type": "virtual:instance", "amount": 3, "vcpus": 8, "memory_mb": 1024, "disk_gb": 10, "affinity": false}]});
    let (st, body) = s.post("/v1/leases", ALICE, inst.clone()).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    let mut more = inst.clone();
    more["name"] = json!("vm2");
    more["reservations"][0]["amount"] = json!(1);
    let (st, err) = s.post("/v1/leases", ALICE, more).await;
    assert_eq!(st, StatusCode::CONFLICT, "{err}");
    s.replay_verify();
}

#[tokio::test]
async fn properties_compare_numbers_as_numbers() {
    let s = Server::start().await;
    let ten = enrol(&s, "ten", json!({"gpus": "10"})).await;
    enrol(&s, "nine", json!({"gpus": 9})).await;
    let (st, l) = s.post("/v1/leases", ALICE, host_lease("n", 1, 2, 1, 2, "[\">\", \"$gpus\", \"9\"]")).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    assert_eq!(hosts_of(&l), vec![ten]);
    // Hypervisor properties on the inventory, as a JSON list.
    let mut big = host_lease("big", 3, 4, 1, 1, "");
    big["reservations"][0]["hypervisor_properties"] = json!([">=", "$memory_mb", "20000"]);
    let (st, err) = s.post("/v1/leases", ALICE, big).await;
    assert_eq!(st, StatusCode::CONFLICT, "{err}");
    let (st, props) = s.get("/v1/os-hosts/properties?detail=True", ADMIN).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(props["resource_properties"][0]["property"], "gpus");
    assert_eq!(props["resource_properties"][0]["values"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn shortening_and_extending_are_rechecked() {
    let s = Server::start().await;
    enrol(&s, "only", json!({})).await;
    let (_, a) = s.post("/v1/leases", ALICE, host_lease("a", 1, 3, 1, 1, "")).await;
    let (_, b) = s.post("/v1/leases", ALICE, host_lease("b", 5, 7, 1, 1, "")).await;
    let a = a["lease"]["id"].as_str().unwrap().to_string();
    let b = b["lease"]["id"].as_str().unwrap().to_string();
    let (st, err) = s.put(&format!("/v1/leases/{a}"), ALICE, json!({"end_date": at(6)})).await;
    assert_eq!(st, StatusCode::CONFLICT, "{err}");
    assert_eq!(err["code"], "berth.lease.reservation_0.no_capacity");
    let (st, got) = s.put(&format!("/v1/leases/{a}"), ALICE, json!({"prolong_for": "2h"})).await;
    assert_eq!(st, StatusCode::OK, "{got}");
    assert!(got["lease"]["end_date"].as_str().unwrap().ends_with(":00:00.000000"));
    let (_, a_now) = s.get(&format!("/v1/leases/{a}"), ALICE).await;
    assert_eq!(a_now["lease"]["end_date"], got["lease"]["end_date"]);
    // b cannot move earlier into a, until a shortens.
    let (st, _) = s.put(&format!("/v1/leases/{b}"), ALICE, json!({"advance_by": "2h"})).await;
    assert_eq!(st, StatusCode::CONFLICT);
    let (st, _) = s.put(&format!("/v1/leases/{a}"), ALICE, json!({"reduce_by": "3h"})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, moved) = s.put(&format!("/v1/leases/{b}"), ALICE, json!({"advance_by": "2h", "name": "b2"})).await;
    assert_eq!(st, StatusCode::OK, "{moved}");
    assert_eq!(moved["lease"]["name"], "b2");
    // The events moved with the window.
    let times: Vec<&str> =
        moved["lease"]["events"].as_array().unwrap().iter().map(|e| e["time"].as_str().unwrap()).collect();
    assert_eq!(times[0], moved["lease"]["start_date"].as_str().unwrap());
    assert_eq!(times[2], moved["lease"]["end_date"].as_str().unwrap());
    // Ending before now, or before the start, is refused.
    let (st, err) = s.put(&format!("/v1/leases/{b}"), ALICE, json!({"end_date": "2001-01-01 00:00"})).await;
    assert_eq!((st, err["code"].as_str()), (StatusCode::BAD_REQUEST, Some("berth.lease.invalid_date")));
    let (st, _) = s.put(&format!("/v1/leases/{b}"), ALICE, json!({"end_date": at(2)})).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // Resizing a reservation is re-checked too.
    let rid = moved["lease"]["reservations"][0]["id"].as_str().unwrap();
    let grow = json!({"reservations": [{"id": rid, "min": 2, "max": 2}]});
    let (st, _) = s.put(&format!("/v1/leases/{b}"), ALICE, grow).await;
    assert_eq!(st, StatusCode::CONFLICT);
    s.replay_verify();
}

#[tokio::test]
async fn projects_are_isolated() {
    let s = Server::start().await;
    enrol(&s, "h", json!({})).await;
    let (_, mine) = s.post("/v1/leases", ALICE, host_lease("mine", 1, 2, 1, 1, "")).await;
    let id = mine["lease"]["id"].as_str().unwrap().to_string();
    assert_eq!(mine["lease"]["project_id"], "p1");
    assert_eq!(mine["lease"]["user_id"], "alice");
    s.post("/v1/leases", BOB, json!({"name": "theirs", "start_date": at(3), "end_date": at(4)})).await;
    let path = format!("/v1/leases/{id}");
    assert_eq!(s.get(&path, BOB).await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.put(&path, BOB, json!({"name": "x"})).await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.delete(&path, BOB).await.0, StatusCode::NOT_FOUND);
    let (_, bobs) = s.get("/v1/leases", BOB).await;
    assert_eq!(bobs["leases"].as_array().unwrap().len(), 1);
    assert_eq!(s.get("/v1/leases?project_id=p1", BOB).await.0, StatusCode::FORBIDDEN);
    assert_eq!(lease_count(&s).await, 2);
    let (_, only) = s.get("/v1/leases?project_id=p1", ADMIN).await;
    assert_eq!(only["leases"][0]["id"], json!(id));
    assert_eq!(s.get(&path, ADMIN).await.0, StatusCode::OK);
    // Hosts and their allocations are the admin's (Blazar's defaults).
    assert_eq!(s.post("/v1/os-hosts", ALICE, json!({"name": "x"})).await.0, StatusCode::FORBIDDEN);
    assert_eq!(s.get("/v1/os-hosts/allocations", ALICE).await.0, StatusCode::FORBIDDEN);
    let (_, allocs) = s.get("/v1/os-hosts/allocations", ADMIN).await;
    assert_eq!(allocs["allocations"][0]["reservations"].as_array().unwrap().len(), 1);
    assert_eq!(s.delete(&path, ALICE).await.0, StatusCode::NO_CONTENT);
    assert_eq!(s.get(&path, ALICE).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_dates_and_bodies_are_400_and_write_nothing() {
    let s = Server::start().await;
    enrol(&s, "h", json!({})).await;
    let base = host_lease("x", 1, 2, 1, 1, "");
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let cases = vec![
        with("start_date", json!("2001-01-01 00:00")),
        with("end_date", json!(at(0))),
        with("end_date", json!(at(1))),
        with("start_date", json!("next tuesday")),
        with("end_date", json!(12)),
        with("name", json!(null)),
        with("reservations", json!({"resource_type": "physical:host"})),
        with("reservations", json!([{"resource_type": "physical:toaster"}])),
        with("reservations", json!([{"resource_type": "physical:host", "min": 2, "max": 1}])),
        with("reservations", json!([{"resource_type": "physical:host", "resource_properties": "[\"~\"]"}])),
        with("reservations", json!([{"resource_type": "virtual:instance", "amount": 1}])),
        with("before_end_date", json!(at(5))),
        Value::String("{not json".into()),
        json!([1, 2]),
    ];
    for body in cases {
        let (st, err) = s.post("/v1/leases", ALICE, body.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body} gave {err}");
        assert!(err["code"].as_str().unwrap().starts_with("berth."), "{err}");
        assert_eq!(err["error_code"], 400);
    }
    assert_eq!(lease_count(&s).await, 0);
    let (st, _) = s.post("/v1/os-hosts", ADMIN, json!({"name": "h2", "vcpus": 1})).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = s
        .post("/v1/os-hosts", ADMIN, json!({"name": "h3", "vcpus": 1, "memory_mb": 1, "local_gb": 1, "rack": [1]}))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (_, hosts) = s.get("/v1/os-hosts", ADMIN).await;
    assert_eq!(hosts["hosts"].as_array().unwrap().len(), 1);
    assert_eq!(s.get("/v1/leases/not-a-uuid", ALICE).await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.get("/v1/leases?limit=0", ALICE).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(s.get("/v1/leases?status=SLEEPY", ALICE).await.0, StatusCode::BAD_REQUEST);
    s.replay_verify();
}

#[tokio::test]
async fn dates_read_and_write_as_blazar_clients_expect() {
    let s = Server::start().await;
    enrol(&s, "h", json!({})).await;
    let start = (Utc::now() + Duration::days(3)).duration_trunc(Duration::hours(1)).unwrap();
    let body = json!({
        "name": "rfc", "start_date": (start.with_timezone(&chrono::FixedOffset::east_opt(7200).unwrap())).to_rfc3339(),
        "end_date": (start + Duration::hours(2)).to_rfc3339(),
    });
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    assert_eq!(l["lease"]["start_date"], start.format("%Y-%m-%dT%H:%M:%S.000000").to_string());
    assert_eq!(
        l["lease"]["before_end_date"],
        (start + Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S.000000").to_string()
    );
    let (st, now) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": "now", "start_date": "now", "end_date": at(1),
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{now}");
    let sd = now["lease"]["start_date"].as_str().unwrap();
    assert_eq!(sd.len(), "2030-01-01T00:00:00.000000".len());
    // Lists page with limit and marker, in creation order, and filter by status.
    let (_, page) = s.get("/v1/leases?limit=1", ALICE).await;
    assert_eq!(page["leases"][0]["name"], "rfc");
    let marker = page["leases"][0]["id"].as_str().unwrap();
    let (_, next) = s.get(&format!("/v1/leases?limit=1&marker={marker}"), ALICE).await;
    assert_eq!(next["leases"][0]["name"], "now");
    let (_, pending) = s.get("/v1/leases?status=PENDING", ALICE).await;
    assert_eq!(pending["leases"].as_array().unwrap().len(), 2);
    let (_, active) = s.get("/v1/leases?status=ACTIVE", ALICE).await;
    assert!(active["leases"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn availability_and_extension_advice() {
    let s = Server::start().await;
    enrol(&s, "h", json!({})).await;
    let (_, a) = s.post("/v1/leases", ALICE, host_lease("a", 1, 3, 1, 1, "")).await;
    s.post("/v1/leases", BOB, host_lease("b", 5, 7, 1, 1, "")).await;
    let id = a["lease"]["id"].as_str().unwrap();
    let (st, ext) = s.get(&format!("/v1/leases/{id}/extension"), ALICE).await;
    assert_eq!(st, StatusCode::OK, "{ext}");
    let five = chrono::NaiveDateTime::parse_from_str(&at(5), "%Y-%m-%d %H:%M").unwrap();
    let five = five.format("%Y-%m-%dT%H:%M:%S.000000").to_string();
    assert_eq!(ext["extension"]["latest_end_date"], five);
    assert_eq!(ext["extension"]["limited_by"], "capacity", "{ext}");
    assert_eq!(ext["extension"]["extendable"], true, "{ext}");
    let held = &ext["extension"]["reservations"][0];
    assert_eq!((&held["latest_end_date"], &held["resource_type"]), (&json!(five), &json!("physical:host")), "{ext}");
    let ask = json!({"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}],
                     "duration": "2h", "from": at(0), "until": at(12), "limit": 3});
    let (st, adv) = s.post("/v1/availability", ALICE, ask).await;
    assert_eq!(st, StatusCode::OK, "{adv}");
    let starts: Vec<String> = adv["availability"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["start_date"].as_str().unwrap()[..16].replace('T', " "))
        .collect();
    // 0..2 collides with a (1..3); 3..5 fits; 5..7 is b's; 7..9 fits.
    assert_eq!(starts, vec![at(3), at(7)]);
}

#[tokio::test]
async fn recurring_leases_book_every_occurrence() {
    let s = Server::start().await;
    enrol(&s, "h", json!({})).await;
    let body = json!({"name": "daily", "start_date": at(0),
        "recurrence": {"cron": "30 9 * * *", "duration": "1h", "until": at(24 * 3)},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", ALICE, body.clone()).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    let n = l["lease"]["recurrence"]["leases"].as_array().unwrap().len();
    assert!((3..=4).contains(&n), "{l}");
    assert!(l["lease"]["start_date"].as_str().unwrap().contains("T09:30:00"));
    assert_eq!(lease_count(&s).await, n);
    // The same again overlaps every occurrence: nothing is booked.
    let mut again = body;
    again["name"] = json!("daily2");
    let (st, _) = s.post("/v1/leases", ALICE, again).await;
    assert_eq!(st, StatusCode::CONFLICT);
    assert_eq!(lease_count(&s).await, n);
    let (st, _) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": "bad", "recurrence": {"cron": "nope", "duration": "1h", "until": at(5)}}),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
}

/// `POST /v1/leases` with an `Idempotency-Key`: as `token`, the status, the
/// `Idempotent-Replayed` header and the body.
async fn create_keyed(s: &Server, token: &str, key: &str, body: &Value) -> (StatusCode, bool, Value) {
    post_keyed(s, "/v1/leases", token, key, body).await
}

/// A POST to `path` with an `Idempotency-Key`, as [`create_keyed`].
async fn post_keyed(s: &Server, path: &str, token: &str, key: &str, body: &Value) -> (StatusCode, bool, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", s.url))
        .header("x-auth-token", token)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap();
    let (status, replayed) = (resp.status(), resp.headers().get("idempotent-replayed").is_some());
    (status, replayed, resp.json().await.unwrap())
}

#[tokio::test]
async fn a_create_sent_again_with_its_key_makes_one_lease() {
    let s = Server::start().await;
    for i in 0..4 {
        enrol(&s, &format!("h{i}"), json!({})).await;
    }
    let body = host_lease("keyed", 1, 3, 1, 1, "");
    let (st, replayed, first) = create_keyed(&s, ALICE, "k-1", &body).await;
    assert_eq!((st, replayed), (StatusCode::CREATED, false), "{first}");
    let (st, replayed, again) = create_keyed(&s, ALICE, "k-1", &body).await;
    assert_eq!((st, replayed), (StatusCode::CREATED, true), "{again}");
    assert_eq!(again["lease"]["id"], first["lease"]["id"]);
    assert_eq!(hosts_of(&again), hosts_of(&first));
    assert_eq!(lease_count(&s).await, 1);

    // Eight at once with one new key: one lease between them.
    let body = host_lease("raced", 1, 3, 1, 1, "");
    let answers = futures::future::join_all((0..8).map(|_| create_keyed(&s, ALICE, "k-2", &body))).await;
    let ids: std::collections::BTreeSet<String> =
        answers.iter().map(|(st, _, b)| format!("{st} {}", b["lease"]["id"])).collect();
    assert_eq!(ids.len(), 1, "every racer gets the one lease: {ids:?}");
    assert_eq!(answers.iter().filter(|(_, replayed, _)| !replayed).count(), 1, "one made it, seven replayed");
    assert_eq!(lease_count(&s).await, 2);

    // The key with another request: 409, nothing made.
    let other = host_lease("other", 4, 6, 1, 1, "");
    let (st, _, refusal) = create_keyed(&s, ALICE, "k-1", &other).await;
    assert_eq!(st, StatusCode::CONFLICT, "{refusal}");
    assert!(refusal.to_string().contains("berth.lease.idempotency_key_reused"), "{refusal}");
    // Keys are the caller's own: Bob's "k-1" is another key.
    let (st, replayed, bobs) = create_keyed(&s, BOB, "k-1", &other).await;
    assert_eq!((st, replayed), (StatusCode::CREATED, false), "{bobs}");
    assert_eq!(lease_count(&s).await, 3);

    // Bad keys: 400 with a code, nothing made.
    for bad in ["", "with space", &"x".repeat(256)] {
        let (st, _, refusal) = create_keyed(&s, ALICE, bad, &host_lease("bad", 7, 8, 1, 1, "")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad:?}: {refusal}");
        assert!(refusal.to_string().contains("berth.lease.idempotency_key_invalid"), "{refusal}");
    }
    assert_eq!(lease_count(&s).await, 3);

    // A host enrolment: sent again with its key, the host first enrolled
    // (without a key it would be a 409, already enrolled).
    let host = json!({"name": "keyed-host", "vcpus": 4, "memory_mb": 4096, "local_gb": 10});
    let (st, replayed, first) = post_keyed(&s, "/v1/os-hosts", ADMIN, "h-1", &host).await;
    assert_eq!((st, replayed), (StatusCode::CREATED, false), "{first}");
    let (st, replayed, again) = post_keyed(&s, "/v1/os-hosts", ADMIN, "h-1", &host).await;
    assert_eq!((st, replayed), (StatusCode::CREATED, true), "{again}");
    assert_eq!(again["host"]["id"], first["host"]["id"]);
    // One key cannot stand for a host and a lease.
    let (st, _, refusal) = post_keyed(&s, "/v1/leases", ADMIN, "h-1", &host_lease("x", 9, 10, 1, 1, "")).await;
    assert_eq!(st, StatusCode::CONFLICT, "{refusal}");
    // The keys are a projection of the log like the rest.
    s.replay_verify();
}

#[tokio::test]
async fn a_host_kept_for_some_projects_is_reserved_by_those_only() {
    let s = Server::start().await;
    let kept = enrol(&s, "kept-1", json!({"authorized_projects": "p1"})).await;
    // Bob's project is not among the host's: no host for him, by lease or by advice.
    let (st, refusal) = s.post("/v1/leases", BOB, host_lease("b", 1, 3, 1, 1, "")).await;
    assert_eq!(st, StatusCode::CONFLICT, "{refusal}");
    let ask = json!({"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}],
                     "duration": "1h", "from": at(1), "until": at(5)});
    let (st, advice) = s.post("/v1/availability", BOB, ask.clone()).await;
    assert_eq!(st, StatusCode::OK, "{advice}");
    assert_eq!(advice["availability"], json!([]), "{advice}");
    // Alice's is.
    let (st, advice) = s.post("/v1/availability", ALICE, ask).await;
    assert_eq!(st, StatusCode::OK, "{advice}");
    assert!(!advice["availability"].as_array().unwrap().is_empty(), "{advice}");
    let (st, a) = s.post("/v1/leases", ALICE, host_lease("a", 1, 3, 1, 1, "")).await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    assert_eq!(hosts_of(&a), vec![kept.clone()]);
    // An open host beside it: Bob gets that one, never the kept one.
    let open = enrol(&s, "open-1", json!({})).await;
    let (st, b) = s.post("/v1/leases", BOB, host_lease("b", 4, 6, 1, 2, "")).await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    assert_eq!(hosts_of(&b), vec![open]);
    s.replay_verify();
}
