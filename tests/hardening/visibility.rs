//! What a member sees: private capabilities hidden, only its own project's
//! instances named, every list paged when asked a limit.

use super::*;

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
    let path = format!("/allocations/{consumer}");
    let (status, answer) = s.placement(reqwest::Method::PUT, &path, ADMIN, "1.28", body).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
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
async fn every_list_pages_with_limit_marker_and_next_links() {
    let s = Server::start_with_config(Some("[api]\nmax_page = 2\n")).await;
    for (i, name) in ["h1", "h2", "h3"].iter().enumerate() {
        let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100, format!("p{i}"): "x"});
        assert_eq!(s.post("/v1/os-hosts", ADMIN, body).await.0, StatusCode::CREATED);
        let (st, l) = s.post("/v1/leases", ALICE, host_lease(&format!("l{i}"), &at(1), &at(2))).await;
        assert_eq!(st, StatusCode::CREATED, "{l}");
    }
    // Each list asked a limit: the server's most per page, then the next
    // link to the rest (Blazar's lists asked none answer all: lists.rs).
    for (path, name, total) in [
        ("/v1/os-hosts?limit=5000", "hosts", 3),
        ("/v1/leases?limit=5000", "leases", 3),
        ("/v1/os-hosts/allocations?limit=5000", "allocations", 3),
        ("/v1/os-hosts/properties?limit=5000", "resource_properties", 3),
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
