//! Crafted and careless input, black box: every refusal is a 4xx document
//! with a machine-readable code in its API's format, writes nothing, and the
//! daemon never panics.

// Tests pick times relative to the real clock, which is the database's
// (one machine); the code under test reads only the database's.
#![allow(clippy::disallowed_methods)]

use berth_testkit::Server;
use chrono::{DateTime, Duration, DurationRound, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ALICE: &str = "alice:p1";

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
    let row = client.query_one("SELECT count(*) FROM log_events", &[]).await.expect("count the log");
    row.get::<_, i64>(0) as usize
}

/// A Blazar refusal: the status, Blazar's document and a Berth code.
fn assert_blazar_refusal(st: StatusCode, body: &Value, want: StatusCode, code: &str, what: &str) {
    assert_eq!(st, want, "{what}: {body}");
    assert_eq!(body["error_code"], want.as_u16(), "{what}: {body}");
    assert_eq!(body["code"], code, "{what}: {body}");
    assert!(body["error_message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    assert!(body["request_id"].as_str().is_some_and(|m| m.starts_with("req-")), "{what}: {body}");
}

#[tokio::test]
async fn dates_outside_years_1_to_9999_are_400_and_write_nothing() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let (st, far) = s.post("/v1/leases", ALICE, host_lease("far", "9999-12-30 00:00", "9999-12-31 00:00")).await;
    assert_eq!(st, StatusCode::CREATED, "{far}");
    let far = far["lease"]["id"].as_str().unwrap().to_string();
    let before = log_length(&s).await;
    const CODE: &str = "berth.lease.invalid_date";

    for (start, end) in [
        (at(1), "+262142-12-31 00:00".to_string()),
        ("-262143-01-01 00:00".to_string(), at(2)),
        (at(1), "10000-01-01 00:00".to_string()),
        (at(1), "9999-12-31T23:30:00-01:00".to_string()),
    ] {
        let (st, e) = s.post("/v1/leases", ALICE, host_lease("x", &start, &end)).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, &format!("{start} to {end}"));
    }
    // A recurrence from year -262143, and one whose occurrence would end past 9999.
    for (start, until, duration) in
        [("-262143-01-01 00:00", "2030-01-01 00:00", "1h"), ("9999-12-31 08:00", "9999-12-31 23:00", "100w")]
    {
        let body = json!({"name": "rec", "start_date": start,
            "recurrence": {"cron": "0 9 * * *", "duration": duration, "until": until},
            "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
        let (st, e) = s.post("/v1/leases", ALICE, body).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{start}: {e}");
        assert!(e["code"].as_str().unwrap().starts_with("berth.lease."), "{e}");
    }
    // Advice over a range at the ends of time.
    for body in [
        json!({"reservations": [], "duration": "1h", "from": "-262143-01-01 00:00"}),
        json!({"reservations": [], "duration": "1h", "until": "+262142-12-31 00:00"}),
        json!({"reservations": [], "duration": "100w", "from": "9999-12-31 00:00", "until": "9999-12-31 23:00"}),
    ] {
        let (st, e) = s.post("/v1/availability", ALICE, body.clone()).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, &body.to_string());
    }
    // Moving the far lease's end past 9999, and asking how far it may go.
    for body in [json!({"prolong_for": "100w"}), json!({"defer_by": "100w"}), json!({"end_date": "+10000-01-01 00:00"})]
    {
        let (st, e) = s.put(&format!("/v1/leases/{far}"), ALICE, body.clone()).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, &body.to_string());
    }
    let (st, e) = s.get(&format!("/v1/leases/{far}/extension?until=%2B262142-12-31%2000:00"), ALICE).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, CODE, "extension until");
    let (st, e) = s.get(&format!("/v1/leases/{far}/extension"), ALICE).await;
    assert_eq!(st, StatusCode::OK, "the default horizon stops at 9999: {e}");
    // Usage over a window before year 1.
    for q in ["start=-5000-01-01%2000:00", "end=%2B262142-12-31%2000:00", "start=0000-01-01%2000:00"] {
        let (st, e) = s.get(&format!("/v1/quotas/projects/p1/usage?{q}"), ALICE).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{q}: {e}");
        assert_eq!(e["code"], CODE, "{q}: {e}");
    }

    assert_eq!(log_length(&s).await, before, "a refused request wrote to the log");
    s.replay_verify();
    s.assert_no_panic();
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

#[tokio::test]
async fn every_refusal_is_a_document_in_its_apis_format() {
    let s = Server::start().await;
    let before = log_length(&s).await;
    // No route: each API's own document.
    let (st, _, e) = raw(&s, "GET", "/v1/nope", vec![]).await;
    assert_blazar_refusal(st, &e, StatusCode::NOT_FOUND, "berth.route_not_found", "/v1/nope");
    let (st, _, e) = raw(&s, "GET", "/nope", vec![]).await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("berth.route_not_found")), "{e}");
    let (st, _, e) = raw(&s, "GET", "/placement/nope", vec![]).await;
    assert_eq!((st, e["errors"][0]["status"].as_u64()), (StatusCode::NOT_FOUND, Some(404)), "{e}");
    // A wrong method: 405 with Allow.
    let (st, headers, e) = raw(&s, "PATCH", "/v1/leases", vec![]).await;
    assert_blazar_refusal(st, &e, StatusCode::METHOD_NOT_ALLOWED, "berth.method_not_allowed", "PATCH /v1/leases");
    let allow = headers.get("allow").expect("an Allow header").to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    // A body over the limit names it.
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(3 * 1024 * 1024));
    let (st, _, e) = raw(&s, "POST", "/v1/leases", big.into_bytes()).await;
    assert_blazar_refusal(st, &e, StatusCode::PAYLOAD_TOO_LARGE, "berth.body_too_large", "3 MB");
    assert!(e["error_message"].as_str().unwrap().contains("2097152"), "{e}");
    // Bad encoding in the path and the query.
    let (st, _, e) = raw(&s, "GET", "/v1/leases/%FF%FE", vec![]).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.invalid.encoding", "path");
    let (st, _, e) = raw(&s, "GET", "/v1/leases?project_id=%C3", vec![]).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.invalid.encoding", "query");
    let (st, _, e) = raw(&s, "GET", "/placement/resource_providers?name=%FF", vec![]).await;
    assert_eq!((st, code_of(&e)), (StatusCode::BAD_REQUEST, "berth.invalid.encoding"), "{e}");
    // Nesting too deep.
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let (st, _, e) = raw(&s, "POST", "/v1/leases", deep.into_bytes()).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.invalid.too_deep", "deep");
    // An extractor's rejection (a body that is not JSON where JSON is read).
    let (st, _, e) = raw(&s, "PUT", "/v1/quotas/projects/p1", b"{nope".to_vec()).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{e}");
    code_of(&e);
    assert_eq!(log_length(&s).await, before);
    s.assert_no_panic();
}

#[tokio::test]
async fn limits_come_from_the_configuration() {
    let s = Server::start_with_config(Some("[api]\nmax_body_bytes = 1000\nmax_json_depth = 3\n")).await;
    let (st, _, e) = raw(&s, "POST", "/v1/leases", vec![b' '; 1001]).await;
    assert_blazar_refusal(st, &e, StatusCode::PAYLOAD_TOO_LARGE, "berth.body_too_large", "1001 bytes");
    assert!(e["error_message"].as_str().unwrap().contains("1000"), "{e}");
    let (st, _, e) = raw(&s, "POST", "/v1/leases", b"{\"a\": [[[1]]]}".to_vec()).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.invalid.too_deep", "four levels");
    let (st, _, e) = raw(&s, "POST", "/v1/leases", b"{\"a\": [[1]]}".to_vec()).await;
    assert_ne!(code_of(&e), "berth.invalid.too_deep", "{st} {e}");
    s.assert_no_panic();
}

#[tokio::test]
async fn control_characters_and_overlong_names_are_400_and_write_nothing() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let (st, p) = s.post("/placement/resource_providers", ADMIN, json!({"name": "rp"})).await;
    assert!(st.is_success(), "{st} {p}");
    let before = log_length(&s).await;
    let lease = |name: &str, params: Value| {
        let mut r = json!({"resource_type": "physical:host", "min": 1, "max": 1});
        for (k, v) in params.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({"name": name, "start_date": at(1), "end_date": at(2), "reservations": [r]})
    };
    let long = "n".repeat(256);
    let cases: Vec<(&str, String, Value, &str)> = vec![
        ("POST", "/v1/leases".into(), lease("a\u{0}b", json!({})), "berth.invalid.control_character"),
        ("POST", "/v1/leases".into(), lease("a\u{1b}[31m", json!({})), "berth.invalid.control_character"),
        (
            "POST",
            "/v1/leases".into(),
            lease("ok", json!({"resource_properties": "[\"=\", \"$a\", \"\u{0}\"]"})),
            "berth.invalid.control_character",
        ),
        ("POST", "/v1/leases".into(), lease(&long, json!({})), "berth.invalid.too_long"),
        ("POST", "/v1/os-hosts".into(), json!({"name": "h\u{0}"}), "berth.invalid.control_character"),
        ("POST", "/v1/os-hosts".into(), json!({"name": "h2", "gpu": "x\u{0}"}), "berth.invalid.control_character"),
        ("POST", "/v1/os-hosts".into(), json!({"name": long}), "berth.invalid.too_long"),
        ("PATCH", "/v1/os-hosts/properties/gp%00u".into(), json!({"private": true}), "berth.invalid.control_character"),
        ("GET", "/v1/quotas/projects/p1/users/a%00b".into(), Value::Null, "berth.invalid.control_character"),
        ("GET", "/v1/leases?project_id=p%00".into(), Value::Null, "berth.invalid.control_character"),
        ("GET", format!("/v1/leases?project_id={long}"), Value::Null, "berth.invalid.too_long"),
        ("POST", "/placement/resource_providers".into(), json!({"name": "r\u{0}"}), "berth.invalid.control_character"),
        ("PUT", "/v1/quotas/projects/p%01".into(), json!({"quotas": {"VCPU": 1}}), "berth.invalid.control_character"),
    ];
    for (method, path, body, code) in cases {
        let bytes = if body.is_null() { vec![] } else { serde_json::to_vec(&body).unwrap() };
        let (st, _, e) = raw(&s, method, &path, bytes).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{method} {path} {body}: {e}");
        assert_eq!(code_of(&e), code, "{method} {path} {body}: {e}");
        assert_eq!(log_length(&s).await, before, "{method} {path} {body} wrote to the log");
    }
    assert_eq!(log_length(&s).await, before, "a refused request wrote to the log");
    s.replay_verify();
    s.assert_no_panic();
}

#[tokio::test]
async fn ids_from_the_token_are_bounded_as_keystones() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let before = log_length(&s).await;
    let long = "u".repeat(8000);
    // Such a token names no one Keystone could have: it is not a token (401),
    // and the message names the id at fault.
    let cases = [
        (format!("{long}:p1"), "user id"),
        (format!("alice:{long}"), "project id"),
        (format!("alice:{}", "p".repeat(65)), "project id"),
        ("ali\tce:p1".to_string(), "user id"),
    ];
    let code = "berth.auth.bad_token";
    for (token, field) in &cases {
        let what = &token[..token.len().min(20)];
        let (st, e) = s.post("/v1/leases", token, host_lease("x", &at(1), &at(2))).await;
        assert_blazar_refusal(st, &e, StatusCode::UNAUTHORIZED, code, what);
        assert!(e["error_message"].as_str().unwrap().contains(field), "{what}: {e}");
        let (st, e) = s.get("/v1/leases", token).await;
        assert_blazar_refusal(st, &e, StatusCode::UNAUTHORIZED, code, what);
        let (st, e) = s.get("/placement/usages?project_id=p1", token).await;
        assert_eq!((st, e["errors"][0]["code"].as_str()), (StatusCode::UNAUTHORIZED, Some(code)), "{what}: {e}");
    }
    assert_eq!(log_length(&s).await, before, "a refused token wrote to the log");
    // Keystone's own bound, 64 characters, is taken.
    let (st, lease) =
        s.post("/v1/leases", &format!("alice:{}", "p".repeat(64)), host_lease("ok", &at(1), &at(2))).await;
    assert_eq!(st, StatusCode::CREATED, "{lease}");
    s.replay_verify();
    s.assert_no_panic();
}

/// What a [`Proxy`] does with the database's traffic.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Link {
    /// Passes it on.
    Up,
    /// Closes every connection and each new one at once: the server is down.
    Down,
    /// Keeps every connection open and passes nothing: a partition.
    Silent,
}

/// A TCP proxy between berthd and PostgreSQL that can fail the link.
struct Proxy {
    port: u16,
    link: tokio::sync::watch::Sender<Link>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (link, _) = tokio::sync::watch::channel(Link::Up);
        let links = link.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((mut client, _)) = listener.accept().await else { return };
                let mut rx = links.subscribe();
                match *rx.borrow_and_update() {
                    Link::Down => continue,
                    Link::Silent => {
                        held.push(client);
                        continue;
                    }
                    Link::Up => {}
                }
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    let failed = async { rx.wait_for(|l| *l != Link::Up).await.map(|l| *l).ok() };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        link = failed => {
                            if link == Some(Link::Silent) {
                                // Hold both ends open, and pass nothing, until the test ends.
                                std::future::pending::<()>().await;
                            }
                        }
                    }
                });
            }
        });
        Proxy { port, link }
    }

    fn set(&self, link: Link) {
        self.link.send_replace(link);
    }
}

/// A server whose database traffic goes through a [`Proxy`].
async fn behind_proxy(config: &str) -> (Server, Proxy) {
    let db = berth_store::testing::TestDatabase::new().await;
    let parsed: tokio_postgres::Config = db.url.parse().unwrap();
    let port = parsed.get_ports()[0];
    let proxy = Proxy::start(format!("127.0.0.1:{port}")).await;
    let url = db.url.replacen(&format!(":{port}/"), &format!(":{}/", proxy.port), 1);
    assert_ne!(url, db.url, "the database URL names its port");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
    let env = [("BERTH_DATABASE_URL", url.as_str()), ("BERTH_MANAGER__ENABLED", "false")];
    let server = Server::launch(db, &env, Some(file.path())).await;
    drop(file);
    (server, proxy)
}

#[tokio::test]
async fn a_database_that_is_down_gives_503_with_retry_after_in_each_apis_document() {
    let (s, proxy) = behind_proxy("connect_timeout_ms = 2000\npool_wait_timeout_ms = 2000\n").await;
    let (st, _) = s.get("/v1/leases", ALICE).await;
    assert_eq!(st, StatusCode::OK);
    proxy.set(Link::Down);
    for (path, style) in
        [("/v1/leases", "blazar"), ("/placement/resource_providers", "placement"), ("/readyz", "berth")]
    {
        let (st, headers, e) = raw(&s, "GET", path, vec![]).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{path}: {e}");
        assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("5"), "{path}");
        assert_eq!(code_of(&e), "berth.unavailable", "{path}: {e}");
        let document = match style {
            "blazar" => &e["error_message"],
            "placement" => &e["errors"][0]["detail"],
            _ => &e["error"]["detail"],
        };
        let detail = document.as_str().unwrap_or_else(|| panic!("{path}: not {style}'s document: {e}"));
        assert!(!detail.contains("database:") && !detail.contains("connection"), "{path} leaks: {detail}");
    }
    let (st, _, e) = raw(&s, "POST", "/v1/leases", serde_json::to_vec(&host_lease("x", &at(1), &at(2))).unwrap()).await;
    assert_eq!((st, code_of(&e)), (StatusCode::SERVICE_UNAVAILABLE, "berth.unavailable"), "{e}");
    proxy.set(Link::Up);
    let mut answered = StatusCode::SERVICE_UNAVAILABLE;
    for _ in 0..50 {
        answered = s.get("/v1/leases", ALICE).await.0;
        if answered == StatusCode::OK {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(answered, StatusCode::OK, "the database is back");
    s.assert_no_panic();
}

#[tokio::test]
async fn a_silent_database_gives_an_answer_not_a_hang() {
    let config = "connect_timeout_ms = 1000\npool_wait_timeout_ms = 1000\n[api]\nrequest_timeout_s = 2\n";
    let (s, proxy) = behind_proxy(config).await;
    assert_eq!(s.get("/v1/leases", ALICE).await.0, StatusCode::OK);
    proxy.set(Link::Silent);
    // A pooled connection waits on its statement until the request times
    // out (408); a new one gives up connecting (503). Either way, an answer.
    for path in ["/v1/leases", "/v1/os-hosts", "/placement/resource_providers"] {
        let (st, _, e) = raw(&s, "GET", path, vec![]).await;
        match st {
            StatusCode::REQUEST_TIMEOUT => assert_eq!(code_of(&e), "berth.timeout", "{path}: {e}"),
            StatusCode::SERVICE_UNAVAILABLE => assert_eq!(code_of(&e), "berth.unavailable", "{path}: {e}"),
            _ => panic!("{path}: {st} {e}"),
        }
    }
    s.assert_no_panic();
}

#[tokio::test]
async fn a_client_that_sends_half_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = Server::start_with_config(Some("[api]\nheader_read_timeout_s = 1\n")).await;
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    conn.write_all(b"GET /v1/leases HTTP/1.1\r\nHost: berth\r\nX-Auth-").await.unwrap();
    let mut buf = Vec::new();
    // Generous: the server closes after one second; a server that never
    // does fails here.
    let read = tokio::time::timeout(std::time::Duration::from_secs(30), conn.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection is still open");
    s.assert_no_panic();
}

#[tokio::test]
async fn live_streams_are_capped_keep_alive_and_end_at_shutdown() {
    let config = "[api]\nmax_streams_per_caller = 1\nmax_streams = 2\nstream_keepalive_s = 1\n";
    let mut s = Server::start_with_config(Some(config)).await;
    let http = reqwest::Client::new();
    let open = |token: &'static str| {
        http.get(format!("{}/v1/log/stream", s.url)).header("x-auth-token", token).header("x-roles", "admin").send()
    };
    let mut first = open(ADMIN).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let second = open(ADMIN).await.unwrap();
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let e: Value = second.json().await.unwrap();
    assert_blazar_refusal(
        StatusCode::TOO_MANY_REQUESTS,
        &e,
        StatusCode::TOO_MANY_REQUESTS,
        "berth.too_many_streams",
        "2nd",
    );
    let other = open("ops:p9").await.unwrap();
    assert_eq!(other.status(), StatusCode::OK, "another caller has its own allowance");
    let third = open("ops2:p9").await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS, "two streams are the server's most");
    // A quiet stream still says something: a keep-alive comment.
    let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), first.chunk()).await.unwrap().unwrap();
    assert!(chunk.is_some_and(|c| c.starts_with(b":")), "a comment line");
    // Shutdown ends the streams, and the daemon exits.
    let status = s.terminate();
    assert!(status.success(), "{status:?}");
    let rest = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Ok(Some(_)) = first.chunk().await {}
    })
    .await;
    assert!(rest.is_ok(), "the stream ended");
    s.assert_no_panic();
}

#[tokio::test]
async fn private_capabilities_are_hidden_from_members_wherever_a_host_is_shown() {
    // Blazar's defaults show hosts to admins only; an operator who opens
    // them to members must still not show members the private capabilities.
    let closed = Server::start().await;
    let (st, _) = closed.get("/v1/os-hosts", ALICE).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "members see no hosts by default");
    let mut policy = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(
        &mut policy,
        b"blazar:os-hosts:list: rule:admin_or_project_reader\nblazar:os-hosts:get: rule:admin_or_project_reader\nblazar:os-hosts:get_resource_properties: rule:admin_or_project_reader\n",
    )
    .unwrap();
    let config = format!("policy_file = {:?}\n", policy.path().display().to_string());
    let s = Server::start_with_config(Some(&config)).await;
    let body = json!({"name": "h", "vcpus": 8, "memory_mb": 16384, "local_gb": 100, "gpu": "true", "rack": "r7"});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    let id = host["host"]["id"].as_str().unwrap().to_string();
    let (st, p) =
        s.call(reqwest::Method::PATCH, "/v1/os-hosts/properties/rack", ADMIN, Some(json!({"private": true}))).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    let shown = |v: &Value| (v.get("gpu").is_some(), v.get("rack").is_some());
    let (_, list) = s.get("/v1/os-hosts", ALICE).await;
    assert_eq!(shown(&list["hosts"][0]), (true, false), "{list}");
    let (_, one) = s.get(&format!("/v1/os-hosts/{id}"), ALICE).await;
    assert_eq!(shown(&one["host"]), (true, false), "{one}");
    let (_, props) = s.get("/v1/os-hosts/properties?detail=true&all=true", ALICE).await;
    assert!(!props.to_string().contains("rack"), "{props}");
    let (_, list) = s.get("/v1/os-hosts", ADMIN).await;
    assert_eq!(shown(&list["hosts"][0]), (true, true), "the admin sees all: {list}");
    let (_, one) = s.get(&format!("/v1/os-hosts/{id}"), ADMIN).await;
    assert_eq!(one["host"]["rack"], "r7");
    s.assert_no_panic();
}

/// `PUT /placement/allocations/{consumer}` for `project`, one VCPU on `provider`.
async fn place_consumer(s: &Server, consumer: &str, provider: &str, project: &str) {
    let body = json!({"allocations": {provider: {"resources": {"VCPU": 1}}},
        "project_id": project, "user_id": "someone", "consumer_generation": null});
    let resp = reqwest::Client::new()
        .put(format!("{}/placement/allocations/{consumer}", s.url))
        .header("x-auth-token", ADMIN)
        .header("openstack-api-version", "placement 1.28")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT, "{}", resp.text().await.unwrap());
}

#[tokio::test]
async fn a_member_names_only_its_own_projects_instances() {
    let s = Server::start().await;
    let (_, host) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": "h", "vcpus": 8, "memory_mb": 16384, "local_gb": 100})).await;
    let provider = host["host"]["id"].as_str().unwrap().to_string();
    let (mine, theirs) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    place_consumer(&s, &mine, &provider, "p1").await;
    place_consumer(&s, &theirs, &provider, "p2").await;
    let lease = |ids: Value| {
        json!({"name": "vm", "start_date": at(1), "end_date": at(2),
            "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1, "memory_mb": 64,
                              "instance_ids": ids}]})
    };
    let before = log_length(&s).await;
    let (st, e) = s.post("/v1/leases", ALICE, lease(json!([theirs]))).await;
    assert_blazar_refusal(st, &e, StatusCode::FORBIDDEN, "berth.lease.foreign_instance", "another project's");
    for unknown in [json!(["i-123"]), json!([uuid::Uuid::new_v4().to_string()])] {
        let (st, e) = s.post("/v1/leases", ALICE, lease(unknown.clone())).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.unknown_instance", &unknown.to_string());
    }
    assert_eq!(log_length(&s).await, before, "a refused lease wrote to the log");
    let (st, l) = s.post("/v1/leases", ALICE, lease(json!([mine]))).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    // Nor can an update swap another project's instance in.
    let (id, rid) = (l["lease"]["id"].as_str().unwrap(), l["lease"]["reservations"][0]["id"].as_str().unwrap());
    let before = log_length(&s).await;
    let (st, e) = s
        .put(&format!("/v1/leases/{id}"), ALICE, json!({"reservations": [{"id": rid, "instance_ids": [theirs]}]}))
        .await;
    assert_blazar_refusal(st, &e, StatusCode::FORBIDDEN, "berth.lease.foreign_instance", "update");
    assert_eq!(log_length(&s).await, before);
    s.assert_no_panic();
}

#[tokio::test]
async fn reservation_parameters_are_declared_and_typed() {
    let s = Server::start().await;
    enrol(&s, "h").await;
    let lease = |params: Value| {
        let mut r = json!({"resource_type": "physical:host"});
        for (k, v) in params.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({"name": "p", "start_date": at(1), "end_date": at(2), "reservations": [r]})
    };
    let before = log_length(&s).await;
    let (st, e) = s.post("/v1/leases", ALICE, lease(json!({"min": 1, "hypervisor_propertie": ""}))).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.unknown_parameter", "misspelt");
    assert!(e["error_message"].as_str().unwrap().contains("\"hypervisor_propertie\""), "{e}");
    for bad in [json!({"min": "one"}), json!({"min": 1.5}), json!({"max": [2]}), json!({"resource_properties": 7})] {
        let (st, e) = s.post("/v1/leases", ALICE, lease(bad.clone())).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.invalid_parameter", &bad.to_string());
    }
    let vm = json!({"name": "vm", "start_date": at(1), "end_date": at(2),
        "reservations": [{"resource_type": "virtual:instance", "amount": "1", "vcpus": 1, "memory_mb": 64, "colour": "red"}]});
    let (st, e) = s.post("/v1/leases", ALICE, vm).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.unknown_parameter", "colour");
    for prolong in [json!("1"), json!(0), json!("soon")] {
        let (st, e) = s.post("/v1/availability", ALICE, json!({"reservations": [], "duration": prolong})).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{prolong}: {e}");
    }
    assert_eq!(log_length(&s).await, before, "a refused lease wrote to the log");
    // Blazar's clients send numbers as strings: they are stored as numbers.
    let (st, l) = s.post("/v1/leases", ALICE, lease(json!({"min": "1", "max": "1"}))).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    assert_eq!((&l["lease"]["reservations"][0]["min"], &l["lease"]["reservations"][0]["max"]), (&json!(1), &json!(1)));
    let id = l["lease"]["id"].as_str().unwrap();
    let (st, e) = s.put(&format!("/v1/leases/{id}"), ALICE, json!({"prolong_for": "1"})).await;
    assert_eq!(
        (st, e["error_message"].as_str().unwrap_or("").contains("give a unit")),
        (StatusCode::BAD_REQUEST, true),
        "{e}"
    );
    s.assert_no_panic();
}

/// The weekdays (chrono's, Monday first) a recurring dry run books.
async fn booked_days(s: &Server, cron: &str) -> Vec<chrono::Weekday> {
    use chrono::Datelike;
    let body = json!({"name": "rec", "start_date": "2031-03-03 00:00", "dry_run": true,
        "recurrence": {"cron": cron, "duration": "1h", "until": "2031-03-17 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, out) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::OK, "{cron}: {out}");
    let occurrences = out["occurrences"].as_array().unwrap();
    assert_eq!(out["count"], occurrences.len());
    occurrences
        .iter()
        .map(|o| {
            assert_eq!(o["fits"], true, "{o}");
            let start = o["start_date"].as_str().unwrap();
            assert!(start.ends_with("T09:00:00.000000"), "{cron}: {start}");
            chrono::NaiveDateTime::parse_from_str(start, "%Y-%m-%dT%H:%M:%S%.f").unwrap().weekday()
        })
        .collect()
}

#[tokio::test]
async fn cron_reads_as_crontab_and_recurrences_are_capped() {
    use chrono::Weekday::*;
    let s = Server::start().await;
    enrol(&s, "h").await;
    let before = log_length(&s).await;
    // Two weeks from Monday 2031-03-03.
    assert_eq!(booked_days(&s, "0 9 * * 1").await, vec![Mon, Mon]);
    assert_eq!(booked_days(&s, "0 9 * * 0").await, vec![Sun, Sun]);
    assert_eq!(booked_days(&s, "0 9 * * 7").await, vec![Sun, Sun]);
    assert_eq!(booked_days(&s, "0 9 * * mon-fri").await, [[Mon, Tue, Wed, Thu, Fri]; 2].concat());
    assert_eq!(log_length(&s).await, before, "a dry run wrote to the log");
    // Errors quote what the user wrote.
    for cron in ["0 9 * * 8", "0 9 * *", "0 0 9 * * 1"] {
        let body = json!({"name": "rec", "start_date": "2031-03-03 00:00",
            "recurrence": {"cron": cron, "duration": "1h", "until": "2031-03-17 00:00"}});
        let (st, e) = s.post("/v1/leases", ALICE, body).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{cron}: {e}");
        assert!(e["error_message"].as_str().unwrap().contains(&format!("{cron:?}")), "{cron}: {e}");
    }
    // Daily for 200 days: over the cap of 100, refused with the count.
    let body = json!({"name": "daily", "start_date": "2031-03-03 00:00",
        "recurrence": {"cron": "0 9 * * *", "duration": "1h", "until": "2031-09-19 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, e) = s.post("/v1/leases", ALICE, body).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.too_many_occurrences", "200 days");
    assert!(e["error_message"].as_str().unwrap().contains("books 200 occurrences, more than the 100"), "{e}");
    assert_eq!(log_length(&s).await, before, "a refused recurrence wrote to the log");
    // A weekly one books for real, Mondays.
    let body = json!({"name": "weekly", "start_date": "2031-03-03 00:00",
        "recurrence": {"cron": "0 9 * * 1", "duration": "1h", "until": "2031-03-17 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, l) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    assert_eq!(l["lease"]["start_date"], "2031-03-03T09:00:00.000000");
    assert_eq!(l["lease"]["recurrence"]["leases"].as_array().unwrap().len(), 2);
    // Now the first Monday is taken: a dry run says so.
    let body = json!({"name": "again", "start_date": "2031-03-03 00:00", "dry_run": true,
        "recurrence": {"cron": "0 9 * * 1", "duration": "1h", "until": "2031-03-17 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (_, out) = s.post("/v1/leases", ALICE, body).await;
    assert_eq!(out["occurrences"][0]["fits"], false, "{out}");
    s.assert_no_panic();
}

#[tokio::test]
async fn the_recurrence_cap_comes_from_the_configuration() {
    let s = Server::start_with_config(Some("[api]\nmax_occurrences = 3\n")).await;
    enrol(&s, "h").await;
    let body = json!({"name": "daily", "start_date": "2031-03-03 00:00",
        "recurrence": {"cron": "0 9 * * *", "duration": "1h", "until": "2031-03-07 00:00"},
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (st, e) = s.post("/v1/leases", ALICE, body).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.lease.too_many_occurrences", "4 days");
    assert!(e["error_message"].as_str().unwrap().contains("books 4 occurrences, more than the 3"), "{e}");
    s.assert_no_panic();
}

#[tokio::test]
async fn every_list_pages_with_limit_marker_and_next_links() {
    let s = Server::start_with_config(Some("[api]\nmax_page = 2\n")).await;
    for (i, name) in ["h1", "h2", "h3"].iter().enumerate() {
        let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100, format!("p{i}"): "x"});
        assert_eq!(s.post("/v1/os-hosts", ADMIN, body).await.0, StatusCode::CREATED);
        let (st, l) = s.post("/v1/leases", ALICE, host_lease(&format!("l{i}"), &at(1), &at(2))).await;
        assert_eq!(st, StatusCode::CREATED, "{l}");
    }
    // Each list: the server's most per page, then the next link to the rest.
    for (path, name, total) in [
        ("/v1/os-hosts", "hosts", 3),
        ("/v1/leases?limit=5000", "leases", 3),
        ("/v1/os-hosts/allocations", "allocations", 3),
        ("/v1/os-hosts/properties", "resource_properties", 3),
        ("/v1/events", "events", 9),
    ] {
        let mut seen = 0;
        let mut next = Some(path.to_string());
        let mut pages = 0;
        while let Some(p) = next.take() {
            let (st, page) = s.get(&p, ADMIN).await;
            assert_eq!(st, StatusCode::OK, "{p}: {page}");
            let n = page[name].as_array().unwrap().len();
            assert!(n <= 2, "{p}: {n} items on a page of at most 2");
            seen += n;
            pages += 1;
            next = page[format!("{name}_links")][0]["href"].as_str().map(str::to_string);
            assert!(pages < 10, "{p}: the links go round");
        }
        assert_eq!(seen, total, "{path}");
    }
    for path in ["/v1/leases?limit=0", "/v1/os-hosts?limit=x", "/v1/events?limit=-1"] {
        let (st, e) = s.get(path, ADMIN).await;
        assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.invalid.limit", path);
    }
    let (st, _) = s.get("/v1/os-hosts/properties?marker=nope", ADMIN).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = s.get(&format!("/v1/os-hosts?marker={}", uuid::Uuid::new_v4()), ADMIN).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // The CLI follows the links.
    let hosts = berth_testkit::berth_json(&s, ADMIN, &["host", "list"]);
    assert_eq!(hosts.as_array().map(Vec::len), Some(3), "{hosts}");
    let leases = berth_testkit::berth_json(&s, ALICE, &["lease", "list"]);
    assert_eq!(leases.as_array().map(Vec::len), Some(3), "{leases}");
    s.assert_no_panic();
}
