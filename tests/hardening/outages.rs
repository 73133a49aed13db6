//! A database that is down or silent, a client that stalls, live streams at
//! their cap and at shutdown: an answer, never a hang.

use super::proxy::{behind_proxy, Link};
use super::*;

#[tokio::test]
async fn a_database_that_is_down_gives_503_with_retry_after_in_each_apis_document() {
    let (s, proxy) = behind_proxy("connect_timeout_ms = 2000\npool_wait_timeout_ms = 2000\n", &[]).await;
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
    let (s, proxy) = behind_proxy(config, &[]).await;
    assert_eq!(s.get("/v1/leases", ALICE).await.0, StatusCode::OK);
    proxy.set(Link::Silent);
    // A pooled connection waits on its statement until the request times
    // out (before the statement's deadline here); a new one gives up
    // connecting. Either way, an answer: the server's 503, never a 408.
    for path in ["/v1/leases", "/v1/os-hosts", "/placement/resource_providers"] {
        let (st, headers, e) = raw(&s, "GET", path, vec![]).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{path}: {e}");
        assert!(headers.contains_key("retry-after"), "{path}");
        assert!(["berth.timeout", "berth.unavailable"].contains(&code_of(&e)), "{path}: {e}");
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
