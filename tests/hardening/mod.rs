//! Crafted and careless input, black box: every refusal is a 4xx document
//! with a machine-readable code in its API's format, writes nothing, and the
//! daemon never panics.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

mod bodies;
mod input;
mod lists;
mod local_time;
mod outages;
mod proxy;
mod reservations;
mod stalls;
mod visibility;

use berth_testkit::{Server, ADMIN, ALICE};
use chrono::{DateTime, Duration, DurationRound, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// `h` hours after a future hour boundary, in Blazar's input format.
fn at(h: i64) -> String {
    let base: DateTime<Utc> = (Utc::now() + Duration::days(10)).duration_trunc(Duration::hours(1)).unwrap();
    (base + Duration::hours(h)).format("%Y-%m-%d %H:%M").to_string()
}

async fn enrol(s: &Server, name: &str) {
    let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
}

fn host_lease(name: &str, start: &str, end: &str) -> Value {
    json!({
        "name": name, "start_date": start, "end_date": end,
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}],
    })
}

/// The log's length: what the daemon has written, all told (read from the
/// database itself, which sees every commit at once).
async fn log_length(s: &Server) -> usize {
    let (client, conn) = tokio_postgres::connect(&s.db.url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    let row = client.query_one("SELECT count(*) AS entries FROM log_events", &[]).await.expect("count the log");
    row.get::<_, i64>("entries") as usize
}

/// A Blazar refusal: the status, Blazar's document and a Berth code.
fn assert_blazar_refusal(st: StatusCode, body: &Value, want: StatusCode, code: &str, what: &str) {
    assert_eq!(st, want, "{what}: {body}");
    assert_eq!(body["error_code"], want.as_u16(), "{what}: {body}");
    assert_eq!(body["code"], code, "{what}: {body}");
    assert!(body["error_message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    assert!(body["request_id"].as_str().is_some_and(|m| m.starts_with("req-")), "{what}: {body}");
}

/// Sends a raw request; the status, the headers and the body as JSON (Null
/// if it is not JSON).
async fn raw(s: &Server, method: &str, path: &str, body: Vec<u8>) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let resp = reqwest::Client::new()
        .request(method, format!("{}{path}", s.url))
        .header("x-auth-token", ADMIN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request");
    let (st, headers) = (resp.status(), resp.headers().clone());
    let text = resp.text().await.unwrap();
    (st, headers, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The `code` of whichever document `body` is.
fn code_of(body: &Value) -> &str {
    body["code"]
        .as_str()
        .or_else(|| body["errors"][0]["code"].as_str())
        .or_else(|| body["error"]["code"].as_str())
        .unwrap_or_else(|| panic!("not an error document: {body}"))
}
