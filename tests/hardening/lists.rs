//! Blazar's lists asked no `limit` or `marker` answer everything, as
//! Blazar does, streamed a page at a time: here pages of 7, so that each
//! list spans several.

use super::*;

const PAGE: usize = 7;

/// A GET's status, whether its body came in chunks (streamed) rather than
/// with a length, its text and the text as JSON.
async fn fetch(s: &Server, path: &str, token: &str) -> (StatusCode, bool, String, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{}{path}", s.url))
        .header("x-auth-token", token)
        .send()
        .await
        .expect("request");
    let status = resp.status();
    let chunked = resp.headers().get("transfer-encoding").is_some_and(|v| v == "chunked");
    let text = resp.text().await.expect("a whole body");
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, chunked, text, json)
}

/// The list `name` at `path` followed page by page through its links.
async fn paged(s: &Server, path: &str, name: &str, token: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut next = Some(format!("{path}{sep}limit={PAGE}"));
    while let Some(p) = next.take() {
        let (st, page) = s.get(&p, token).await;
        assert_eq!(st, StatusCode::OK, "{p}: {page}");
        let items = page[name].as_array().unwrap();
        assert!(items.len() <= PAGE, "{p}: {page}");
        all.extend(items.iter().cloned());
        next = page[format!("{name}_links")][0]["href"].as_str().map(str::to_string);
        assert!(all.len() <= 100, "{p}: the links go round");
    }
    all
}

/// The whole list at `path`: every item the pages hold, in their order,
/// as the very document a page is (no links), streamed when it spans more
/// than one page.
async fn whole(s: &Server, path: &str, name: &str, token: &str, key: &str) -> Vec<Value> {
    let (st, chunked, text, doc) = fetch(s, path, token).await;
    assert_eq!(st, StatusCode::OK, "{path}: {text}");
    let items = doc[name].as_array().unwrap_or_else(|| panic!("{path}: {text}")).clone();
    assert_eq!(text, serde_json::to_string(&json!({ name: items })).unwrap(), "{path}: not the page's document");
    assert_eq!(chunked, items.len() >= PAGE, "{path}: streamed only past one page");
    assert_eq!(items, paged(s, path, name, token).await, "{path}: the pages and the whole differ");
    let keys: Vec<String> = items.iter().map(|i| i[key].as_str().unwrap().to_string()).collect();
    let mut once = keys.clone();
    once.dedup();
    assert_eq!(once, keys, "{path}: an item twice");
    items
}

#[tokio::test]
async fn blazars_lists_without_a_limit_answer_everything_once_in_order() {
    let s = Server::start_with_config(Some(&format!("[api]\nmax_page = {PAGE}\n"))).await;
    // Enrolled out of name order, each with a capability of its own.
    for i in (0..17).rev() {
        let body = json!({"name": format!("h{i:02}"), "vcpus": 8, "memory_mb": 16384, "local_gb": 100,
                          format!("cap{i:02}"): "x"});
        let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
        assert_eq!(st, StatusCode::CREATED, "{host}");
    }
    for (who, count) in [(ALICE, 9), (berth_testkit::BOB, 6)] {
        for i in 0..count {
            let (st, l) = s.post("/v1/leases", who, host_lease(&format!("l{i}"), &at(1), &at(2))).await;
            assert_eq!(st, StatusCode::CREATED, "{l}");
        }
    }
    let hosts = whole(&s, "/v1/os-hosts", "hosts", ADMIN, "hypervisor_hostname").await;
    let names: Vec<&str> = hosts.iter().map(|h| h["hypervisor_hostname"].as_str().unwrap()).collect();
    let want: Vec<String> = (0..17).map(|i| format!("h{i:02}")).collect();
    assert_eq!(names, want, "every host once, by name");
    let allocations = whole(&s, "/v1/os-hosts/allocations", "allocations", ADMIN, "resource_id").await;
    let ids: Vec<&Value> = hosts.iter().map(|h| &h["id"]).collect();
    assert_eq!(allocations.iter().map(|a| &a["resource_id"]).collect::<Vec<_>>(), ids);
    let held: usize = allocations.iter().map(|a| a["reservations"].as_array().unwrap().len()).sum();
    assert_eq!(held, 15, "{allocations:?}");
    let props = whole(&s, "/v1/os-hosts/properties?detail=true", "resource_properties", ADMIN, "property").await;
    assert_eq!(props.len(), 17, "{props:?}");
    assert!(props.iter().all(|p| p["values"] == json!(["x"])), "{props:?}");
    // Each caller's leases, in creation order; a member sees its own only.
    let all = whole(&s, "/v1/leases", "leases", ADMIN, "id").await;
    assert_eq!(all.len(), 15);
    for (who, project, count) in [(ALICE, "p1", 9), (berth_testkit::BOB, "p2", 6)] {
        let mine = whole(&s, "/v1/leases", "leases", who, "id").await;
        assert_eq!(mine.len(), count, "{who}");
        assert!(mine.iter().all(|l| l["project_id"] == project), "{who} sees another project's lease");
        let order: Vec<&Value> = all.iter().filter(|l| l["project_id"] == project).map(|l| &l["id"]).collect();
        assert_eq!(mine.iter().map(|l| &l["id"]).collect::<Vec<_>>(), order, "{who}");
        let mine = whole(&s, &format!("/v1/leases?project_id={project}"), "leases", who, "id").await;
        assert_eq!(mine.len(), count, "{who}");
    }
    let (st, _, text, _) = fetch(&s, "/v1/leases?project_id=p2", ALICE).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{text}");
    // The policy speaks before anything is streamed.
    for (path, token, want) in [
        ("/v1/os-hosts", ALICE, StatusCode::FORBIDDEN),
        ("/v1/os-hosts/allocations", ALICE, StatusCode::FORBIDDEN),
        ("/v1/os-hosts", "", StatusCode::UNAUTHORIZED),
        ("/v1/leases", "", StatusCode::UNAUTHORIZED),
    ] {
        let (st, chunked, text, doc) = fetch(&s, path, token).await;
        assert_eq!((st, chunked), (want, false), "{path} as {token:?}: {text}");
        assert!(doc["error_code"].is_number(), "{path}: {text}");
    }
    s.assert_no_panic();
}

#[tokio::test]
async fn a_list_goes_on_after_an_item_deleted_between_its_pages() {
    let s = Server::start_with_config(Some(&format!("[api]\nmax_page = {PAGE}\n"))).await;
    for i in 0..10 {
        enrol(&s, &format!("h{i:02}")).await;
    }
    let (_, first) = s.get(&format!("/v1/os-hosts?limit={PAGE}"), ADMIN).await;
    let last = first["hosts"][PAGE - 1]["id"].as_str().unwrap();
    let next = first["hosts_links"][0]["href"].as_str().unwrap().to_string();
    let (st, _) = s.delete(&format!("/v1/os-hosts/{last}"), ADMIN).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    // A client's marker names a host: a gone one is refused, not taken for
    // the list's end.
    let (st, e) = s.get(&next, ADMIN).await;
    assert_blazar_refusal(st, &e, StatusCode::BAD_REQUEST, "berth.host.invalid", "a gone marker");
    // A streamed list goes on from the last key it wrote, gone or not.
    let store = s.db.store(2);
    let rest = store.hosts(Some("h06"), PAGE as i64).await.unwrap();
    assert_eq!(rest.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["h07", "h08", "h09"]);
    for i in 0..3 {
        let (st, l) = s.post("/v1/leases", ALICE, host_lease(&format!("l{i}"), &at(1), &at(2))).await;
        assert_eq!(st, StatusCode::CREATED, "{l}");
    }
    let filter = berth_store::queries::leases::LeaseFilter::default();
    let leases = store.leases(&filter).await.unwrap();
    let (st, _) = s.delete(&format!("/v1/leases/{}", leases[1].record.id), ALICE).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let after = berth_store::queries::leases::LeaseFilter { after: Some(leases[1].key()), ..filter };
    let rest = store.leases(&after).await.unwrap();
    assert_eq!(rest.iter().map(|l| l.record.id).collect::<Vec<_>>(), [leases[2].record.id]);
    s.assert_no_panic();
}
