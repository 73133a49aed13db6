//! Offers (`POST /v1/offers`) and booking them (`POST /v1/leases` with
//! `offer`), black box: a real berthd on a real database, over HTTP.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

mod ranking;

use berth_testkit::{Server, ADMIN, ALICE, BOB};
use chrono::{DateTime, Duration, DurationRound, NaiveDateTime, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A future hour boundary: hour 0 of the calendars these tests make.
fn base() -> DateTime<Utc> {
    (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap()
}

/// `h` hours after `base`, in Blazar's input format.
fn at(base: DateTime<Utc>, h: i64) -> String {
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

/// A date as offers answer it.
fn parsed(s: &Value) -> DateTime<Utc> {
    let s = s.as_str().unwrap_or_else(|| panic!("a date, not {s}"));
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").unwrap_or_else(|e| panic!("{s}: {e}")).and_utc()
}

/// Enrols host `name` (8 VCPU), its `rack` capability its name.
async fn enrol(s: &Server, name: &str) {
    let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100, "rack": name});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
}

/// A lease of `hosts` hosts (on host `on` alone, when named) over hours
/// `[start, end)` after `base`.
fn lease(name: &str, base: DateTime<Utc>, start: i64, end: i64, hosts: u32, on: Option<&str>) -> Value {
    let props = on.map(|h| json!(["=", "$rack", h]).to_string()).unwrap_or_default();
    json!({"name": name, "start_date": at(base, start), "end_date": at(base, end),
           "reservations": [{"resource_type": "physical:host", "min": hosts, "max": hosts,
                             "hypervisor_properties": "", "resource_properties": props}]})
}

/// An offer request for `min..=max` hosts.
fn ask(min: u32, max: u32, duration: Value, from: String, until: String) -> Value {
    json!({"reservations": [{"resource_type": "physical:host", "min": min, "max": max}],
           "duration": duration, "from": from, "until": until})
}

async fn offers(s: &Server, who: &str, body: Value) -> Vec<Value> {
    let (st, got) = s.post("/v1/offers", who, body).await;
    assert_eq!(st, StatusCode::OK, "{got}");
    got["offers"].as_array().unwrap().clone()
}

/// An offer's hosts: its one reservation's count.
fn hosts(offer: &Value) -> u64 {
    let r = &offer["reservations"][0];
    assert_eq!(r["min"], r["max"], "{offer}");
    r["min"].as_u64().unwrap()
}

async fn book(s: &Server, who: &str, offer: &Value, name: &str) -> (StatusCode, Value) {
    s.post("/v1/leases", who, json!({"lease": {"offer": offer["id"], "name": name}})).await
}

async fn lease_count(s: &Server) -> usize {
    let (st, body) = s.get("/v1/leases", ADMIN).await;
    assert_eq!(st, StatusCode::OK);
    body["leases"].as_array().unwrap().len()
}

/// The log's length: what the daemon has written, all told.
async fn log_length(s: &Server) -> i64 {
    let (client, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    client.query_one("SELECT count(*) AS n FROM log_events", &[]).await.expect("count").get("n")
}

#[tokio::test]
async fn an_offer_books_its_window_and_hosts_once() {
    let s = Server::start().await;
    for h in ["h0", "h1", "h2"] {
        enrol(&s, h).await;
    }
    let b = base();
    let (st, _) = s.post("/v1/leases", BOB, lease("bob", b, 3, 6, 1, Some("h0"))).await;
    assert_eq!(st, StatusCode::CREATED);
    let found = offers(&s, ALICE, ask(1, 3, json!({"min": "1h", "max": "5h"}), at(b, 0), at(b, 0))).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let o = &found[0];
    // Three hosts until h0 is taken, at hour 3; two for the full 5 hours:
    // the longest first, then the most hosts at that length.
    assert_eq!((parsed(&o["start_date"]), parsed(&o["end_date"])), (b, b + Duration::hours(5)));
    assert_eq!((o["duration"].as_i64(), hosts(o)), (Some(5 * 3600), 2));
    assert!(parsed(&o["expires_at"]) > Utc::now());

    // Two at once: one books, the other is told it was taken.
    let (one, two) = tokio::join!(book(&s, ALICE, o, "first"), book(&s, ALICE, o, "second"));
    let mut statuses = [one.0, two.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::CREATED, StatusCode::CONFLICT], "{} {}", one.1, two.1);
    let (made, refused) = if one.0 == StatusCode::CREATED { (one.1, two.1) } else { (two.1, one.1) };
    assert_eq!(refused["code"], "berth.offer.taken", "{refused}");
    let id = made["lease"]["id"].as_str().unwrap().to_string();
    assert!(refused["error_message"].as_str().unwrap().contains(&id), "{refused}");
    assert_eq!(lease_count(&s).await, 2);
    assert_eq!(parsed(&json!(made["lease"]["start_date"].as_str().unwrap().replace(' ', "T"))), b);
    assert_eq!(made["lease"]["reservations"][0]["allocations"].as_array().unwrap().len(), 2, "{made}");

    // Deleted, the lease is gone; its offer is still taken.
    let (st, _) = s.delete(&format!("/v1/leases/{id}"), ALICE).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, again) = book(&s, ALICE, o, "third").await;
    assert_eq!((st, again["code"].as_str()), (StatusCode::CONFLICT, Some("berth.offer.taken")), "{again}");
    s.replay_verify();
    s.assert_no_panic();
}

#[tokio::test]
async fn an_offer_is_its_callers_and_cannot_be_forged() {
    let s = Server::start().await;
    enrol(&s, "h0").await;
    let b = base();
    let found = offers(&s, ALICE, ask(1, 1, json!("2h"), at(b, 0), at(b, 0))).await;
    let o = &found[0];
    let before = log_length(&s).await;
    for who in [BOB, "carol:p1"] {
        let (st, e) = book(&s, who, o, "not-mine").await;
        assert_eq!((st, e["code"].as_str()), (StatusCode::NOT_FOUND, Some("berth.offer.not_found")), "{who}: {e}");
    }
    let id = o["id"].as_str().unwrap();
    let (body, tag) = id.split_once('.').unwrap();
    let flipped = |s: &str, i: usize| {
        let mut b = s.as_bytes().to_vec();
        b[i] = if b[i] == b'A' { b'B' } else { b'A' };
        String::from_utf8(b).unwrap()
    };
    let huge = "A".repeat(1 << 20);
    for forged in [format!("{}.{tag}", flipped(body, 10)), format!("{body}.{}", flipped(tag, 3)), "nope".into(), huge] {
        let (st, e) = s.post("/v1/leases", ALICE, json!({"offer": forged, "name": "forged"})).await;
        assert!(st == StatusCode::NOT_FOUND || st == StatusCode::PAYLOAD_TOO_LARGE, "{st} {e}");
        assert!(e["code"].as_str().is_some_and(|c| c.starts_with("berth.")), "{e}");
    }
    // A lease booking an offer gives nothing else but its name.
    let beside = json!({"offer": o["id"], "name": "x", "end_date": at(b, 9)});
    let (st, e) = s.post("/v1/leases", ALICE, beside).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{e}");
    assert!(e["error_message"].as_str().unwrap().contains("end_date"), "{e}");
    assert_eq!(log_length(&s).await, before, "a refusal writes nothing");
    let (st, made) = book(&s, ALICE, o, "mine").await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    s.assert_no_panic();
}

#[tokio::test]
async fn an_offer_taken_since_is_gone_and_an_old_one_expired() {
    let s = Server::start_with_config(Some("[api]\noffer_ttl_s = 2\n")).await;
    enrol(&s, "h0").await;
    enrol(&s, "h1").await;
    let b = base();
    let found = offers(&s, ALICE, ask(2, 2, json!("3h"), at(b, 0), at(b, 0))).await;
    assert_eq!(found.len(), 1);
    let (st, _) = s.post("/v1/leases", BOB, lease("bob", b, 2, 4, 1, Some("h1"))).await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, e) = book(&s, ALICE, &found[0], "late").await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::CONFLICT, Some("berth.offer.gone")), "{e}");
    assert!(e["error_message"].as_str().unwrap().contains("capacity"), "{e}");

    let found = offers(&s, ALICE, ask(1, 1, json!("1h"), at(b, 0), at(b, 0))).await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (st, e) = book(&s, ALICE, &found[0], "too-late").await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::CONFLICT, Some("berth.offer.expired")), "{e}");
    assert_eq!(lease_count(&s).await, 1);
    s.assert_no_panic();
}

#[tokio::test]
async fn offers_keep_within_the_callers_quota() {
    let s = Server::start().await;
    for h in ["h0", "h1", "h2"] {
        enrol(&s, h).await;
    }
    let (st, e) = s.put("/v1/quotas/projects/p1", ADMIN, json!({"quotas": {"VCPU": 16}})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    let b = base();
    // One host of the quota's two is held by an earlier lease over hours 1..3.
    let (st, e) = s.post("/v1/leases", ALICE, lease("mine", b, 1, 3, 1, Some("h0"))).await;
    assert_eq!(st, StatusCode::CREATED, "{e}");
    let found = offers(&s, ALICE, ask(1, 3, json!("4h"), at(b, 0), at(b, 4))).await;
    let got: Vec<(DateTime<Utc>, u64)> = found.iter().map(|o| (parsed(&o["start_date"]), hosts(o))).collect();
    // At 0 the window meets the held hours: one host more; from 3 on, two.
    assert_eq!(got, [(b, 1), (b + Duration::hours(3), 2)]);
    let (st, made) = book(&s, ALICE, &found[1], "q2").await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    // Booked, the later offer leaves no quota for the earlier one's last hour.
    let (st, e) = book(&s, ALICE, &found[0], "q1").await;
    assert_eq!((st, e["code"].as_str()), (StatusCode::CONFLICT, Some("berth.offer.gone")), "{e}");
    assert!(e["error_message"].as_str().unwrap().contains("quota"), "{e}");
    s.replay_verify();
    // Another project's quota is its own.
    let found = offers(&s, BOB, ask(1, 3, json!("4h"), at(b, 20), at(b, 20))).await;
    assert_eq!(found.iter().map(hosts).collect::<Vec<_>>(), [3]);
    s.assert_no_panic();
}

#[tokio::test]
async fn a_bad_offer_request_is_refused_by_name_and_writes_nothing() {
    let s = Server::start().await;
    enrol(&s, "h0").await;
    let b = base();
    let before = log_length(&s).await;
    let good = ask(1, 1, json!("1h"), at(b, 0), at(b, 4));
    let with = |k: &str, v: Value| {
        let mut body = good.clone();
        body[k] = v;
        body
    };
    let cases = [
        (with("colour", json!("blue")), "colour"),
        (with("duration", json!({"min": "1h", "max": "2h", "step": "1m"})), "step"),
        (with("duration", json!({"min": "3h", "max": "2h"})), "min is longer"),
        (with("duration", json!({"min": "3h"})), "max"),
        (with("limit", json!(1_000_000)), "limit"),
        (with("limit", json!(0)), "limit"),
        (with("order", json!("cheapest")), "order"),
        (with("until", json!(at(b, -1))), "before from"),
        (with("until", json!(at(b, 24 * 800))), "366 days"),
        (with("duration", json!("400d")), "366 days"),
        (json!({"offers": {"duration": "1h", "extra": 1}}), "extra"),
    ];
    for (body, named) in cases {
        let (st, e) = s.post("/v1/offers", ALICE, body.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(e["error_message"].as_str().unwrap().contains(named), "{body}: {e}");
        assert!(e["code"].as_str().is_some_and(|c| c.starts_with("berth.")), "{e}");
    }
    // Wrapped, as the house's bodies may be.
    let (st, e) = s.post("/v1/offers", ALICE, json!({"offers": good})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    assert_eq!(log_length(&s).await, before, "asking writes nothing");
    s.assert_no_panic();
}

#[tokio::test]
async fn an_instance_amount_range_is_offered_at_the_most_that_fits() {
    let s = Server::start().await;
    enrol(&s, "h0").await;
    enrol(&s, "h1").await;
    let b = base();
    let instances = |amount: Value, from: i64| {
        json!({"reservations": [{"resource_type": "virtual:instance", "amount": amount,
                                 "vcpus": 4, "memory_mb": 1024, "disk_gb": 10}],
               "duration": "2h", "from": at(b, from), "until": at(b, from)})
    };
    // Two hosts of 8 VCPU: four instances of 4.
    let found = offers(&s, ALICE, instances(json!({"min": 1, "max": 10}), 0)).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["reservations"][0]["amount"], 4, "{found:?}");
    let (st, made) = book(&s, ALICE, &found[0], "four").await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    assert_eq!(made["lease"]["reservations"][0]["amount"], 4, "{made}");
    // Within a quota of 8 VCPU: two.
    let (st, e) = s.put("/v1/quotas/projects/p1", ADMIN, json!({"quotas": {"VCPU": 8}})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    let found = offers(&s, ALICE, instances(json!({"min": 1, "max": 10}), 10)).await;
    assert_eq!(found[0]["reservations"][0]["amount"], 2, "{found:?}");
    // None at all when even the least does not fit.
    assert!(offers(&s, ALICE, instances(json!({"min": 3, "max": 10}), 10)).await.is_empty());
    for (bad, named) in [
        (json!({"min": 3, "max": 2}), "min is above max"),
        (json!({"min": 1, "max": 2, "step": 1}), "step"),
        (json!({"min": 1, "max": 100_000}), "amount"),
    ] {
        let (st, e) = s.post("/v1/offers", ALICE, instances(bad.clone(), 0)).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {e}");
        assert!(e["error_message"].as_str().unwrap().contains(named), "{bad}: {e}");
    }
    s.replay_verify();
    s.assert_no_panic();
}

#[tokio::test]
async fn offers_keep_each_hosts_cleaning_time() {
    let s = Server::start_with_config(Some("cleaning_time = 60\n")).await;
    enrol(&s, "h0").await;
    let b = base();
    let (st, e) = s.post("/v1/leases", BOB, lease("bob", b, 2, 4, 1, None)).await;
    assert_eq!(st, StatusCode::CREATED, "{e}");
    let found = offers(&s, ALICE, ask(1, 1, json!({"min": "1h", "max": "10h"}), at(b, 0), at(b, 6))).await;
    let got: Vec<(DateTime<Utc>, i64)> =
        found.iter().map(|o| (parsed(&o["start_date"]), o["duration"].as_i64().unwrap())).collect();
    // An hour of cleaning before Bob's lease and after it.
    assert_eq!(got, [(b, 3600), (b + Duration::hours(5), 10 * 3600)]);
    let (st, made) = book(&s, ALICE, &found[0], "before").await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    s.assert_no_panic();
}
