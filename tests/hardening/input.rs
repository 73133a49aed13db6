//! Refused input: dates out of range, bodies and paths no API accepts, names
//! and ids past their bounds.

use super::*;

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
