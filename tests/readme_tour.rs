//! The README's tour, run command by command against a started berthd with
//! the demo inventory, so that it cannot drift from what Berth does: every
//! command must succeed (a `--follow` may only be stopped by its time running
//! out). Then, in the same shell, its Keystone block as written: the run's
//! Keystone (scripts/keystone/with-keystone.sh), and the `berthd dev` it
//! starts beside the first.

use std::process::Command;

use berth_store::testing::TestDatabase;
use berth_testkit::{berth_bin, berthd_bin, Server};

const README: &str = include_str!("../README.md");

const KEYSTONE: &str = "### The same through Keystone";

/// The `sh` blocks of the tour, in order.
fn tour_blocks() -> Vec<String> {
    let start = README.find("## A tour").expect("the README has a tour");
    let end = start + README[start..].find(KEYSTONE).expect("the tour ends before Keystone");
    let blocks = sh_blocks(&README[start..end]);
    assert!(blocks.len() >= 4, "the tour's blocks: {blocks:?}");
    blocks
}

/// The Keystone section's one `sh` block.
fn keystone_block() -> String {
    let start = README.find(KEYSTONE).expect("the README has a Keystone section");
    let end = start + README[start..].find("\n## ").expect("a section follows");
    let blocks = sh_blocks(&README[start..end]);
    assert_eq!(blocks.len(), 1, "the Keystone section's blocks: {blocks:?}");
    blocks.into_iter().next().unwrap()
}

fn sh_blocks(mut rest: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    while let Some(open) = rest.find("```sh\n") {
        let body = &rest[open + 6..];
        let close = body.find("```").expect("a closed block");
        blocks.push(body[..close].to_owned());
        rest = &body[close..][3..];
    }
    blocks
}

/// The block's commands: lines joined until bash reads them as complete
/// (continuations, a `for` loop).
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in block.lines() {
        if cur.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        let complete =
            !line.ends_with('\\') && Command::new("bash").args(["-n", "-c", &cur]).output().unwrap().status.success();
        if complete {
            out.push(std::mem::take(&mut cur));
        }
    }
    assert!(cur.is_empty(), "an unfinished command: {cur}");
    out
}

fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `cmd` as the script runs it: echoed, and the script ends at its failure.
fn checked(cmd: &str, run: &str) -> String {
    format!(
        "echo \"\\$ \"{q}\n{run}rc=$?; if [ $rc -ne 0 ]; then echo \"TOUR FAILED (exit $rc): \"{q} >&2; exit 1; fi\n",
        q = quoted(cmd.trim_end())
    )
}

/// The port of the run's Keystone, which the block's `run.sh start` then
/// finds running.
fn keystone_port() -> String {
    let url = std::env::var("KEYSTONE_URL")
        .expect("no Keystone: run the tests under scripts/keystone/with-keystone.sh (make test does)");
    let port = url.trim_end_matches("/v3").rsplit(':').next().unwrap_or_default();
    assert!(port.parse::<u16>().is_ok(), "KEYSTONE_URL {url}");
    port.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_tour_runs() {
    assert!(
        Command::new("jq").arg("--version").output().is_ok_and(|o| o.status.success()),
        "the README tour uses jq: install it (apt-get install jq)"
    );
    let db = TestDatabase::new().await;
    // What `make run` (`berthd dev`) serves: the demo hosts included.
    let env = [("BERTH_MANAGER__POLL_INTERVAL_MS", "200"), ("BERTH_DEMO_INVENTORY", "true")];
    let s = Server::launch(db, &env, None).await;

    let ks_port = keystone_port();
    let ks_addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let ks_data = tempfile::tempdir().unwrap();

    // One shell for the whole tour (its exports carry), each command
    // checked; what it left running (the Keystone block's berthd) is
    // stopped when it ends.
    let mut script = String::from("set -o pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n");
    for block in tour_blocks() {
        for cmd in commands(&block) {
            let cmd = cmd.replace("http://127.0.0.1:8778", &s.url);
            let run = if cmd.contains("--follow") {
                // Never ends by itself: it must still be running after 3 s.
                format!("timeout 3 bash -c {}\n[ $? -eq 124 ]\n", quoted(&cmd))
            } else {
                cmd.clone()
            };
            script.push_str(&checked(&cmd, &run));
        }
    }
    for cmd in commands(&keystone_block()) {
        // The block's Keystone port is the run's; its berthd serves on a
        // free port, its cluster in a directory of this test's.
        let cmd = cmd
            .replace("36000", &ks_port)
            .replace("127.0.0.1:8779", &ks_addr)
            .replace(".data/pg-keystone", &ks_data.path().to_string_lossy());
        script.push_str(&checked(&cmd, &cmd));
    }
    let bin_dir = berth_bin().parent().unwrap().to_owned();
    assert_eq!(berthd_bin().parent(), Some(bin_dir.as_path()));
    // From the clone's top directory, as the tour says, whose `export PATH`
    // then finds the binaries; only a target directory elsewhere needs
    // them put on PATH here.
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the clone's top directory");
    let inherited = std::env::var("PATH").unwrap_or_default();
    let path = if bin_dir == top.join("target/debug") {
        inherited.split(':').filter(|d| !d.starts_with(&*top.to_string_lossy())).collect::<Vec<_>>().join(":")
    } else {
        format!("{}:{inherited}", bin_dir.display())
    };
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(top)
        .env("PATH", path)
        .env("BERTH_DATABASE_URL", &s.db.url)
        .env_remove("BERTH_TOKEN")
        .env_remove("BERTH_LOG")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the tour failed:\n{stdout}\n{stderr}");
    // The tour's outcomes, beside every command succeeding.
    assert!(stdout.contains("\"workshop\"") || stdout.contains("workshop"), "{stdout}");
    assert!(stdout.contains("berth.lease.reservation_0.no_capacity"), "the 409 is shown: {stdout}");
    // Disabling a host the workshop holds moves it, said by the lease's name.
    assert!(stdout.contains("lease workshop (") && stdout.contains(": 1 moved off compute-"), "{stdout}");
    assert!(stdout.contains("projections match the log"), "{stdout}");
    // Ending a lease says it stays ACTIVE until its end has run.
    assert!(stderr.contains("now-1 ends now: a manager runs its end through the plugins"), "{stderr}");
    // Through Keystone: the second berthd checks tokens, and says where to get one.
    assert!(stdout.contains("auth: keystone"), "{stdout}");
    assert!(stdout.to_lowercase().contains("www-authenticate: keystone uri="), "{stdout}");
    s.assert_no_panic();
}
