//! `GET /allocation_candidates` on the case of Placement's bug 2070257: a
//! compute node with 8 child providers (each with SR-IOV VFs) and a request
//! of six granular groups under `group_policy=isolate`, which has
//! 8·7·6·5·4·3 = 20,160 candidates. Four clients repeat the query against a
//! real `berthd serve` process; reports the time per answer and berthd's
//! resident memory, now and at its peak.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use berth_core::{EventMeta, Inventory};
use berth_store::commands::NewProvider;
use berth_store::testing::TestDatabase;

use crate::daemon::Daemon;
use crate::report::{ms, percentile, Report};

const CHILDREN: usize = 8;
const GROUPS: usize = 6;
const CLIENTS: usize = 4;
/// Queries per client.
const REPEATS: usize = 5;

pub async fn run(report: &mut Report) -> Result<()> {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let root = store.create_provider(&meta, NewProvider { uuid: None, name: "compute".into(), parent: None }).await?;
    let vcpu = BTreeMap::from([("VCPU".to_string(), Inventory { total: 64, ..Default::default() })]);
    store.replace_inventories(&meta, root, None, vcpu).await?;
    for i in 0..CHILDREN {
        let pf = NewProvider { uuid: None, name: format!("compute-pf{i}"), parent: Some(root) };
        let child = store.create_provider(&meta, pf).await?;
        let vfs = BTreeMap::from([("SRIOV_NET_VF".to_string(), Inventory { total: 8, ..Default::default() })]);
        store.replace_inventories(&meta, child, None, vfs).await?;
    }
    drop(store);
    let daemon = Daemon::start(&db.url, 8).await?;
    let groups: Vec<String> = (1..=GROUPS).map(|g| format!("resources{g}=SRIOV_NET_VF:1")).collect();
    let url = format!("{}/placement/allocation_candidates?{}&group_policy=isolate", daemon.url, groups.join("&"));
    let before = daemon.memory_mb()?;

    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::builder().timeout(Duration::from_secs(300)).build()?;
            let mut answers = Vec::new();
            for _ in 0..REPEATS {
                let t = Instant::now();
                let resp = http
                    .get(&url)
                    .header("x-auth-token", "admin")
                    .header("openstack-api-version", "placement 1.39")
                    .send()
                    .await?;
                ensure!(resp.status().is_success(), "allocation candidates answered {}", resp.status());
                let body: serde_json::Value = resp.json().await?;
                let count = body["allocation_requests"].as_array().map_or(0, Vec::len);
                answers.push((t.elapsed(), count));
            }
            anyhow::Ok(answers)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        for (latency, count) in t.await?? {
            ensure!(count == 20_160, "expected 20160 candidates, got {count}");
            latencies.push(latency);
        }
    }
    latencies.sort();
    report.line(format!(
        "Allocation candidates, bug 2070257's case (20,160 candidates), {CLIENTS} clients x {REPEATS}: p50 {}, p99 {}",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0))
    ));
    report.memory("berthd", "before those queries", before, None);
    report.memory("berthd", "after those queries", daemon.memory_mb()?, Some(200.0));
    Ok(())
}
