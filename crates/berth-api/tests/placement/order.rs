//! Placement's own order in its answers: a consumer's allocations as they
//! were asked for, classes in the standard order elsewhere; never sorted by UUID.

use super::*;

/// Placement answers what is keyed by provider or class in its own order,
/// not sorted: a consumer's allocations as they were asked for, a
/// provider's consumers as they were written, classes in the standard order
/// elsewhere. The providers' (and consumers') UUIDs sort the other way
/// round, and the classes were asked for in neither alphabetical nor
/// standard order, so a sorted answer cannot pass.
#[tokio::test]
async fn answers_keep_placements_order_of_providers_and_classes() {
    let api = Api::start().await;
    let (late, early) = ("ffffffff-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002");
    for (name, uuid) in [("rp-late", late), ("rp-early", early)] {
        let a = api.admin(Method::POST, "/resource_providers", Some(json!({"name": name, "uuid": uuid}))).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        api.inventory(
            uuid.parse().unwrap(),
            json!({"DISK_GB": {"total": 100}, "MEMORY_MB": {"total": 4096}, "VCPU": {"total": 8}}),
        )
        .await;
    }
    let keys = |v: &Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    let put_raw = |consumer: &'static str, body: String| {
        let http = api.http.clone();
        let url = format!("{}/allocations/{consumer}", api.base);
        async move {
            let r = http
                .put(url)
                .header("x-auth-token", "admin")
                .header("openstack-api-version", "placement 1.39")
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::NO_CONTENT, "{}", r.text().await.unwrap());
        }
    };
    // Written as text, so that the request's order is the one sent.
    let body = |first: &str, second: &str, generation: &str| {
        format!(
            r#"{{"allocations": {{"{first}": {{"resources": {{"MEMORY_MB": 512, "DISK_GB": 5, "VCPU": 1}}}},
                 "{second}": {{"resources": {{"DISK_GB": 7, "VCPU": 2}}}}}},
                 "project_id": "p1", "user_id": "u1", "consumer_generation": {generation}, "consumer_type": "INSTANCE"}}"#
        )
    };
    let (c1, c2) = ("fffffffe-0000-4000-8000-000000000003", "00000000-0000-4000-8000-000000000004");
    put_raw(c1, body(late, early, "null")).await;
    put_raw(c2, body(late, early, "null")).await;

    let shown = api.admin(Method::GET, &format!("/allocations/{c1}"), None).await;
    assert_eq!(keys(&shown.body["allocations"]), [late, early], "{}", shown.body);
    assert_eq!(keys(&shown.body["allocations"][late]["resources"]), ["MEMORY_MB", "DISK_GB", "VCPU"]);
    assert_eq!(keys(&shown.body["allocations"][early]["resources"]), ["DISK_GB", "VCPU"]);

    // A provider's consumers as their allocations were written.
    let of = api.admin(Method::GET, &format!("/resource_providers/{late}/allocations"), None).await;
    assert_eq!(keys(&of.body["allocations"]), [c1, c2], "{}", of.body);
    assert_eq!(keys(&of.body["allocations"][c2]["resources"]), ["MEMORY_MB", "DISK_GB", "VCPU"]);

    // Elsewhere, classes in the standard order.
    let usages = api.admin(Method::GET, &format!("/resource_providers/{early}/usages"), None).await;
    assert_eq!(keys(&usages.body["usages"]), ["VCPU", "MEMORY_MB", "DISK_GB"], "{}", usages.body);
    let invs = api.admin(Method::GET, &format!("/resource_providers/{early}/inventories"), None).await;
    assert_eq!(keys(&invs.body["inventories"]), ["VCPU", "MEMORY_MB", "DISK_GB"], "{}", invs.body);
    let totals = api.admin(Method::GET, "/usages?project_id=p1", None).await;
    // By consumer type (1.38 on), the count where Placement's handler puts
    // it: after the group's first class.
    let by_type = &totals.body["usages"]["INSTANCE"];
    assert_eq!(keys(by_type), ["VCPU", "consumer_count", "MEMORY_MB", "DISK_GB"], "{}", totals.body);

    // Asked for the other way round, answered the other way round; the
    // order is the log's, so replay makes the same rows.
    put_raw(c1, body(early, late, "1")).await;
    let shown = api.admin(Method::GET, &format!("/allocations/{c1}"), None).await;
    assert_eq!(keys(&shown.body["allocations"]), [early, late], "{}", shown.body);
    assert_eq!(keys(&shown.body["allocations"][early]["resources"]), ["MEMORY_MB", "DISK_GB", "VCPU"]);
    let of = api.admin(Method::GET, &format!("/resource_providers/{late}/allocations"), None).await;
    assert_eq!(keys(&of.body["allocations"]), [c2, c1], "the last written last: {}", of.body);
    assert!(api.store.replay_verify().await.unwrap().is_clean());
}
