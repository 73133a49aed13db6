//! Placement claims over HTTP as an outside client makes them: `wrk` (a
//! real load generator, not Berth's own client) with `clients` connections
//! against a real `berthd serve` process, each request a
//! `PUT /placement/allocations/{new consumer}` of one VCPU on a random one of
//! 100 providers. Reports the rate beside pgbench's, wrk's p99, the
//! providers over capacity afterwards (which must be none), what each claim
//! cost the database, and berthd's resident memory after the run; once with
//! `clients` connections and once with [`WIDE`], each against a fresh
//! database and berthd.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use berth_core::EventMeta;
use berth_store::testing::TestDatabase;
use uuid::Uuid;

use crate::daemon::Daemon;
use crate::report::Report;
use crate::wrk_report::WrkResult;

const PROVIDERS: usize = 100;
/// Room for more one-VCPU claims per provider than a run makes.
const VCPU: i64 = 1 << 20;

/// Connections of the second run: many clients on few cores is where the
/// claim lanes, not the database, decide the rate.
const WIDE: usize = 64;

pub async fn run(report: &mut Report, clients: usize, seconds: u64) -> Result<()> {
    if which("wrk").is_none() {
        report.line(
            "Placement claims with wrk: NOT MEASURED, wrk is missing (make bench installs it: scripts/ensure-command.sh)"
                .into(),
        );
        return Ok(());
    }
    run_with(report, clients, seconds, 0.6, 10.0).await?;
    if clients != WIDE {
        run_with(report, WIDE, seconds, 0.4, 20.0).await?;
    }
    Ok(())
}

/// One run with `clients` connections; `target` is the ratio to pgbench
/// and `p99_ms` the latency the issues ask for.
async fn run_with(report: &mut Report, clients: usize, seconds: u64, target: f64, p99_ms: f64) -> Result<()> {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let meta = EventMeta { actor: Some("bench".into()), ..Default::default() };
    let providers = crate::setup::providers(&store, &meta, PROVIDERS, "host-", VCPU, VCPU * 256).await?;
    crate::setup::warm(&db, &store, &providers).await?;
    drop(store);
    let daemon = Daemon::start(&db.url, clients + 4).await?;

    let mut script = tempfile::Builder::new().suffix(".lua").tempfile()?;
    std::io::Write::write_all(&mut script, lua(&providers).as_bytes())?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(clients).max(1);
    let before = crate::db_cost::Snapshot::take(&db.url).await?;
    let out = tokio::process::Command::new("wrk")
        .args(["-t", &threads.to_string(), "-c", &clients.to_string(), "-d", &format!("{seconds}s")])
        .args(["--latency", "--timeout", "10s", "-s"])
        .arg(script.path())
        .arg(&daemon.url)
        .output()
        .await
        .context("run wrk")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    ensure!(out.status.success(), "wrk failed: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    let wrk = WrkResult::parse(&text)?;
    // wrk's rate is over its whole run: the claims it made, near enough.
    let claims = (wrk.requests_per_s * seconds as f64).round() as usize;
    let after = crate::db_cost::Snapshot::take(&db.url).await?;
    let (cost, tables) = (after.per_unit_since(&before, claims), after.tables_per_unit_since(&before, claims));

    report.rate_against(
        &format!(
            "Placement claims over HTTP, wrk ({clients} connections, {threads} threads, {PROVIDERS} providers, \
             berthd process; {} non-2xx)",
            wrk.non_2xx
        ),
        wrk.requests_per_s,
        target,
    );
    report.line(format!(
        "Placement claim latency with wrk ({clients} connections): p50 {:.2} ms, p99 {:.2} ms (target p99 < {p99_ms} ms)",
        wrk.p50_ms, wrk.p99_ms
    ));
    let over = over_capacity(&daemon.url, &providers).await?;
    report.line(format!("Placement claim over HTTP, per claim: {cost}"));
    report.line(format!("  rows per claim by table: {tables}"));
    report.line(format!("Placement providers over capacity after the wrk run: {over}"));
    report.memory("berthd", "after the wrk claims", daemon.memory_mb()?, Some(150.0));
    ensure!(wrk.non_2xx == 0, "{} wrk requests were answered with something other than 2xx", wrk.non_2xx);
    ensure!(over == 0, "{over} providers over capacity");
    Ok(())
}

/// A wrk script: each request a new consumer (thread id and a counter, so
/// no two requests of the run share one) on a random provider.
fn lua(providers: &[Uuid]) -> String {
    let mut list = String::new();
    for p in providers {
        let _ = write!(list, "\"{p}\",");
    }
    format!(
        r#"local providers = {{{list}}}
local counter = 0
local threads = 0
-- `id` is each thread's global, set from the main state.
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
function init(args)
  math.randomseed(id * 7919 + os.time())
end
function request()
  counter = counter + 1
  local consumer = string.format("%08x-0000-4000-8000-%012x", id, counter)
  local p = providers[math.random(#providers)]
  local body = '{{"allocations":{{"' .. p .. '":{{"resources":{{"VCPU":1,"MEMORY_MB":256}}}}}},' ..
    '"project_id":"bench","user_id":"bench","consumer_generation":null,"consumer_type":"INSTANCE"}}'
  return wrk.format("PUT", "/placement/allocations/" .. consumer,
    {{["Content-Type"] = "application/json", ["X-Auth-Token"] = "admin",
      ["OpenStack-API-Version"] = "placement 1.39"}}, body)
end
"#
    )
}

/// Providers over capacity, as Placement's read view shows them.
async fn over_capacity(base: &str, providers: &[Uuid]) -> Result<usize> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let mut over = 0;
    for p in providers {
        let usages: serde_json::Value = http
            .get(format!("{base}/placement/resource_providers/{p}/usages"))
            .header("x-auth-token", "admin")
            .send()
            .await?
            .json()
            .await?;
        if usages["usages"]["VCPU"].as_i64().unwrap_or(0) > VCPU {
            over += 1;
        }
    }
    Ok(over)
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| std::path::Path::new(d).join(program)).find(|p| p.exists())
}
