//! An operator's policy file changes exactly the rules it names: one that
//! lets readers create leases, one that forbids members to extend theirs.
//! A file with an unknown rule or a bad expression stops berthd at start,
//! naming the line; `berthd policy list` shows every rule.

use std::io::Write;
use std::process::Command;

use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A berthd whose policy file is `yaml` (the file lives as long as the server).
async fn with_policy(yaml: &str) -> (Server, tempfile::NamedTempFile) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(yaml.as_bytes()).unwrap();
    let config = format!("policy_file = {:?}\n", file.path().display().to_string());
    (Server::start_with_config(Some(&config)).await, file)
}

fn lease(name: &str) -> Value {
    json!({"name": name, "start_date": "2031-01-02 09:00", "end_date": "2031-01-02 17:00",
           "reservations": [{"resource_type": "virtual:instance", "amount": 1, "vcpus": 1,
                             "memory_mb": 512, "disk_gb": 1}], "events": []})
}

async fn enrol(s: &Server) {
    let host = json!({"name": "h1", "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    assert_eq!(s.post("/v1/os-hosts", ADMIN, host).await.0, StatusCode::CREATED);
}

/// A reader of p1 in noauth: `X-Roles: reader`.
async fn as_reader(s: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> StatusCode {
    let mut r = reqwest::Client::new()
        .request(method, format!("{}{path}", s.url))
        .header("x-auth-token", "carol:p1")
        .header("x-roles", "reader");
    if let Some(b) = body {
        r = r.json(&b);
    }
    r.send().await.unwrap().status()
}

#[tokio::test]
async fn a_policy_file_can_let_readers_create_leases_and_nothing_else() {
    use reqwest::Method;
    // By default a reader reads and writes nothing.
    let s = Server::start().await;
    enrol(&s).await;
    assert_eq!(as_reader(&s, Method::POST, "/v1/leases", Some(lease("r"))).await, StatusCode::FORBIDDEN);
    drop(s);

    let (s, _file) =
        with_policy("# readers may lease\n\"blazar:leases:create\": \"rule:admin_or_project_reader\"\n").await;
    enrol(&s).await;
    assert_eq!(as_reader(&s, Method::POST, "/v1/leases", Some(lease("r"))).await, StatusCode::CREATED);
    let (_, mine) = s.post("/v1/leases", ALICE, lease("a")).await;
    let path = format!("/v1/leases/{}", mine["lease"]["id"].as_str().unwrap());
    // Only creating changed: a reader still may not change or delete.
    assert_eq!(as_reader(&s, Method::PUT, &path, Some(json!({"name": "x"}))).await, StatusCode::FORBIDDEN);
    assert_eq!(as_reader(&s, Method::DELETE, &path, None).await, StatusCode::FORBIDDEN);
    assert_eq!(as_reader(&s, Method::GET, &path, None).await, StatusCode::OK);
    assert_eq!(as_reader(&s, Method::GET, "/v1/os-hosts", None).await, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_policy_file_can_forbid_members_to_extend_leases() {
    let (s, _file) = with_policy("blazar:leases:extend: role:admin\n").await;
    enrol(&s).await;
    let (st, l) = s.post("/v1/leases", ALICE, lease("a")).await;
    assert_eq!(st, StatusCode::CREATED, "{l}");
    let path = format!("/v1/leases/{}", l["lease"]["id"].as_str().unwrap());
    let (st, e) = s.put(&path, ALICE, json!({"prolong_for": "1h"})).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{e}");
    assert_eq!(e["code"], "berth.forbidden");
    let (st, e) = s.put(&path, ALICE, json!({"end_date": "2031-01-02 18:00"})).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{e}");
    let (_, shown) = s.get(&path, ALICE).await;
    assert_eq!(shown["lease"]["end_date"], l["lease"]["end_date"], "a refused extension changes nothing");
    // Everything else a member did stays allowed: rename, shorten.
    assert_eq!(s.put(&path, ALICE, json!({"name": "renamed"})).await.0, StatusCode::OK);
    let (st, e) = s.put(&path, ALICE, json!({"reduce_by": "1h"})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    // The admin still extends.
    let (st, e) = s.put(&path, ADMIN, json!({"prolong_for": "2h"})).await;
    assert_eq!(st, StatusCode::OK, "{e}");
}

/// `berthd serve` with `yaml` as its policy file: its exit status and stderr.
fn serve_with(yaml: &str) -> (bool, String) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(yaml.as_bytes()).unwrap();
    let out = Command::new(berth_testkit::berthd_bin())
        .arg("serve")
        .env("BERTH_POLICY_FILE", file.path())
        .env("BERTH_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
        .env("BERTH_LISTEN", "127.0.0.1:0")
        .env("BERTH_AUTH", "noauth")
        .env("BERTH_LOG", "warn")
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_bad_policy_file_stops_berthd_naming_the_line() {
    let (ok, err) = serve_with("\"blazar:leases:get\": \"@\"\n\n\"blazar:leases:creat\": \"role:member\"\n");
    assert!(!ok);
    assert!(err.contains("line 3") && err.contains("blazar:leases:creat"), "{err}");
    let (ok, err) = serve_with("blazar:leases:get: \"@\"\nblazar:leases:create: \"role:member and (role:x\"\n");
    assert!(!ok);
    assert!(err.contains("line 2") && err.contains("closing parenthesis"), "{err}");
    let (ok, err) = serve_with("blazar:leases:get: rule:nowhere\n");
    assert!(!ok);
    assert!(err.contains("nowhere"), "{err}");
}

#[test]
fn policy_list_shows_every_rule_with_its_default() {
    let out = Command::new(berth_testkit::berthd_bin()).args(["policy", "list"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for a in berth_api::access::Action::ALL {
        assert!(text.contains(&format!("#\"{}\": ", a.name())), "{} missing:\n{text}", a.name());
    }
    assert!(text.contains("#\"blazar:leases:create\": \"rule:admin_or_project_member\""), "{text}");
    // The list is a valid policy file once uncommented.
    let uncommented: String = text.lines().filter_map(|l| l.strip_prefix("#\"")).map(|l| format!("\"{l}\n")).collect();
    berth_api::Rules::with_file(&uncommented).unwrap();
    // docs/policy.md lists every rule with its default too.
    let doc =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/policy.md")).unwrap();
    for d in berth_api::access::defaults() {
        assert!(doc.contains(&format!("| `{}` | `{}` |", d.name, d.rule)), "docs/policy.md lacks {}", d.name);
    }
}
