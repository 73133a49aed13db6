//! The real python-blazarclient library, from PyPI in a venv under the
//! target directory, driven against berthd's /v1 (tests/blazarclient/drive.py).
//! Skips, loudly, only when the package index cannot be reached. Its
//! command line makes flavor:instance leases (drive_flavor.py).

use std::path::Path;
use std::process::Command;

use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// pip failed for want of a network, not for anything of ours.
fn unreachable(output: &str) -> bool {
    [
        "NewConnectionError",
        "Max retries exceeded",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "Name or service not known",
        "No matching distribution found",
        "ConnectTimeoutError",
        "ProxyError",
    ]
    .iter()
    .any(|s| output.contains(s))
}

/// A venv with python-blazarclient installed; `None` when the index is out of reach.
fn venv() -> Option<std::path::PathBuf> {
    let dir = berth_testkit::target_dir().join("blazarclient-venv");
    let python = dir.join("bin/python");
    // Each test is a process of its own: the first makes the venv while the
    // others wait on this lock, rather than two pips writing into one venv.
    let lock = std::fs::File::create(berth_testkit::target_dir().join("blazarclient-venv.lock")).expect("lock file");
    lock.lock().expect("lock the venv");
    let importable = |p: &Path| {
        Command::new(p).args(["-c", "import blazarclient.client"]).status().map(|s| s.success()).unwrap_or(false)
    };
    if python.exists() && importable(&python) {
        return Some(python);
    }
    let interpreter = std::env::var("BERTH_PYTHON").unwrap_or_else(|_| "python3".into());
    let made =
        Command::new(&interpreter).args(["-m", "venv", "--clear"]).arg(&dir).status().expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv {} failed", dir.display());
    let out = Command::new(dir.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "python-blazarclient"])
        .output()
        .expect("run pip");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        if unreachable(&text) {
            eprintln!("\n*** SKIPPED python-blazarclient test: the package index is unreachable ***\n{text}");
            return None;
        }
        panic!("pip install python-blazarclient failed:\n{text}");
    }
    assert!(importable(&python), "python-blazarclient installed but does not import");
    Some(python)
}

#[tokio::test(flavor = "multi_thread")]
async fn python_blazarclient_drives_leases_and_hosts() {
    let Some(python) = tokio::task::spawn_blocking(venv).await.unwrap() else {
        return;
    };
    let server = Server::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("blazarclient/drive.py");
    let url = format!("{}/v1", server.url);
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python).arg(script).env("BLAZAR_URL", url).env("BLAZAR_TOKEN", "admin").output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "python-blazarclient run failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("python-blazarclient: all good"));
    server.replay_verify();
}

/// Flavors with the traits' rules, for `flavor_instances_through_blazars_cli_and_placement`.
const FLAVORS: &str = r#"
[plugins.flavor.flavors."1"]
name = "gpu.small"
vcpus = 2
ram = 1024
disk = 10
extra_specs = { "trait:CUSTOM_GPU" = "required", "trait:CUSTOM_SLOW" = "forbidden", "trait:in:CUSTOM_A100,CUSTOM_H100" = "required" }
"#;

/// Enrols host `name` (8 VCPU) with Placement traits `traits`; its id.
async fn host_with_traits(s: &Server, name: &str, traits: &[&str]) -> String {
    let body = json!({"name": name, "vcpus": 8, "memory_mb": 16384, "local_gb": 100});
    let (st, host) = s.post("/v1/os-hosts", ADMIN, body).await;
    assert_eq!(st, StatusCode::CREATED, "{host}");
    let id = host["host"]["id"].as_str().unwrap().to_string();
    for t in traits {
        let (st, _) = placement(s, Method::PUT, &format!("/placement/traits/{t}"), None).await;
        assert!(st.is_success(), "{t}: {st}");
    }
    let path = format!("/placement/resource_providers/{id}/traits");
    let (_, now) = placement(s, Method::GET, &path, None).await;
    let body = json!({"traits": traits, "resource_provider_generation": now["resource_provider_generation"]});
    let (st, answer) = placement(s, Method::PUT, &path, Some(body)).await;
    assert_eq!(st, StatusCode::OK, "{answer}");
    id
}

/// A Placement call as Nova makes it (microversion 1.39), by the admin.
async fn placement(s: &Server, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", s.url))
        .header("x-auth-token", ADMIN)
        .header("openstack-api-version", "placement 1.39");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn flavor_instances_through_blazars_cli_and_placement() {
    let Some(python) = tokio::task::spawn_blocking(venv).await.unwrap() else {
        return;
    };
    let s = Server::start_with_config(Some(FLAVORS)).await;
    let fast = host_with_traits(&s, "gpu-fast", &["CUSTOM_GPU", "CUSTOM_A100"]).await;
    host_with_traits(&s, "gpu-slow", &["CUSTOM_GPU", "CUSTOM_SLOW", "CUSTOM_H100"]).await;
    host_with_traits(&s, "gpu-old", &["CUSTOM_GPU"]).await;
    host_with_traits(&s, "plain", &[]).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("blazarclient/drive_flavor.py");
    let cli = python.with_file_name("blazar");
    let url = format!("{}/v1", s.url);
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(python);
        cmd.arg(script).env("BLAZAR_URL", url).env("BLAZAR_TOKEN", ALICE).env("BLAZAR_CLI", cli);
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "blazar flavor run failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lease = stdout.lines().find_map(|l| l.strip_prefix("LEASE ")).unwrap().trim();
    // Both instances on the one host with the flavor's traits (affinity).
    let record = s.db.store(2).lease(lease.parse().unwrap(), None).await.unwrap().record;
    let reservation = &record.reservations[0];
    assert_eq!(reservation.slots.len(), 2);
    assert!(reservation.slots.iter().all(|slot| slot.provider.to_string() == fast), "{reservation:?}");
    // Nova's claim for an instance of the reserved flavor draws from the slots.
    let class = berth_core::lease::reservation_class(reservation.id);
    let claim = json!({
        "allocations": {&fast: {"resources": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10, &class: 1}}},
        "project_id": "p1", "user_id": "alice", "consumer_generation": null, "consumer_type": "INSTANCE",
    });
    let path = format!("/placement/allocations/{}", uuid::Uuid::new_v4());
    let (st, answer) = placement(&s, Method::PUT, &path, Some(claim)).await;
    assert_eq!(st, StatusCode::NO_CONTENT, "{answer}");
    let (_, usages) = placement(&s, Method::GET, &format!("/placement/resource_providers/{fast}/usages"), None).await;
    assert_eq!(usages["usages"]["VCPU"], 4, "drawn from the reservation, not on top of it: {usages}");
    s.replay_verify();
}

/// Hosts enough that a list spans ten of the server's pages.
const MANY: usize = 10_000;

/// `VmRSS` and `VmHWM` (the peak) of process `pid`, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}"));
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a size in kB")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `MANY` hosts enrolled through the store's own bulk command, a thousand
/// a time, rather than ten thousand HTTP calls.
async fn enrol_many(s: &Server) {
    use futures::{StreamExt, TryStreamExt};
    let store = s.db.store(2);
    let meta = berth_core::EventMeta::default();
    let chunks = (0..MANY).step_by(1_000).map(|first| {
        let hosts = (first..MANY.min(first + 1_000))
            .map(|i| berth_store::commands::NewHost {
                name: format!("node-{i:05}"),
                resources: Some((64, 262_144, 1_000)),
                reservable: true,
                capabilities: [("rack".to_string(), json!(format!("r{}", i % 40)))].into(),
            })
            .collect();
        store.enrol_hosts(&meta, hosts)
    });
    let enrolled: Vec<Vec<uuid::Uuid>> = futures::stream::iter(chunks).buffered(2).try_collect().await.unwrap();
    assert_eq!(enrolled.concat().len(), MANY);
}

#[tokio::test(flavor = "multi_thread")]
async fn python_blazarclient_lists_ten_thousand_hosts_in_bounded_memory() {
    let Some(python) = tokio::task::spawn_blocking(venv).await.unwrap() else {
        return;
    };
    let s = Server::start().await;
    let began = std::time::Instant::now();
    enrol_many(&s).await;
    println!("enrolled {MANY} hosts in {:.1} s", began.elapsed().as_secs_f64());
    // One page first, as every list answered before: the pool's
    // connections, buffers and arenas a page needs are then in place.
    let (st, page) = s.get("/v1/os-hosts?limit=1000", ADMIN).await;
    assert_eq!((st, page["hosts"].as_array().map(Vec::len)), (StatusCode::OK, Some(1000)));
    let (rss, peak) = memory_kib(s.pid());
    println!("berthd after one page: VmRSS {rss} KiB, VmHWM {peak} KiB");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("blazarclient/list_hosts.py");
    let (cli, url) = (python.with_file_name("blazar"), format!("{}/v1", s.url));
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(python);
        cmd.arg(script).env("BLAZAR_URL", url).env("BLAZAR_TOKEN", ADMIN).env("BLAZAR_CLI", cli);
        cmd.env("HOSTS", MANY.to_string()).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "listing failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let document = reqwest::Client::new()
        .get(format!("{}/v1/os-hosts", s.url))
        .header("x-auth-token", ADMIN)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let (rss_after, peak_after) = memory_kib(s.pid());
    let kib = document.len() as u64 / 1024;
    println!("berthd after three listings: VmRSS {rss_after} KiB, VmHWM {peak_after} KiB; the list is {kib} KiB");
    // Holding the whole list takes its text and its rows: with the list in
    // one page (max_page = 10000) the peak grew 14 MiB here, over four
    // times the text. Read and written a page at a time it grew 2.4 MiB;
    // twice the text is the bound.
    let grew = peak_after.saturating_sub(peak);
    assert!(grew < 2 * kib, "berthd's peak grew {grew} KiB listing {kib} KiB");
    s.assert_no_panic();
}
