//! The log's last entries, as `tail` shows a file's: `GET /v1/log?last=N`,
//! and `berth log tail`, which starts there (ten by default, `-n`) and with
//! `--follow` goes on live from them, no entry twice.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use berth_testkit::{berth, Server, ADMIN, ALICE};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn enrol(s: &Server, name: &str) {
    let (st, body) =
        s.post("/v1/os-hosts", ADMIN, json!({"name": name, "vcpus": 4, "memory_mb": 4096, "local_gb": 10})).await;
    assert!(st.is_success(), "{body}");
}

fn positions(entries: &[Value]) -> Vec<i64> {
    entries.iter().map(|e| e["position"].as_i64().expect("a position")).collect()
}

/// `berth -f json log tail ARGS`: the entries it printed.
fn tail(s: &Server, args: &[&str]) -> Vec<Value> {
    let (ok, out, err) = berth(s, ADMIN, &[&["-f", "json", "log", "tail"], args].concat());
    assert!(ok, "{err}");
    out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// The whole log once the entries naming `last` are final. The log shows
/// an entry once no transaction older than it is open anywhere on the
/// server (`berth_store::log`), and other tests' transactions share it:
/// until then the last enrolments are missing from every read, which
/// would then disagree with later ones. Nothing writes after `last`.
async fn final_log(s: &Server, last: &str) -> Vec<Value> {
    for _ in 0..300 {
        let (st, all) = s.get("/v1/log?limit=10000", ADMIN).await;
        assert_eq!(st, StatusCode::OK, "{all}");
        let all = all["entries"].as_array().unwrap().clone();
        if all.iter().any(|e| e.to_string().contains(last)) {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the entries of {last} never became final");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_entries_first_then_live_from_them() {
    let s = Server::start().await;
    for i in 0..12 {
        enrol(&s, &format!("h-{i}")).await;
    }
    let all = final_log(&s, "h-11").await;
    assert!(all.len() > 12, "{}", all.len());

    // The API: the last three in log order, and reading after them finds nothing yet.
    let (st, last) = s.get("/v1/log?last=3", ADMIN).await;
    assert_eq!(st, StatusCode::OK, "{last}");
    let entries = last["entries"].as_array().unwrap();
    assert_eq!(positions(entries), positions(&all[all.len() - 3..]), "{last}");
    assert_eq!(last["next"], entries[2]["cursor"]);
    let (_, after) = s.get(&format!("/v1/log?after={}", last["next"].as_str().unwrap()), ADMIN).await;
    assert_eq!(after["entries"], json!([]), "{after}");
    for bad in ["last=0", "last=10001", "last=x", "last=3&after=0-0", "last=3&limit=3"] {
        let (st, body) = s.get(&format!("/v1/log?{bad}"), ADMIN).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(body["code"].as_str().is_some_and(|c| c.starts_with("berth.")), "{bad}: {body}");
    }
    let (st, _) = s.get("/v1/log?last=3", ALICE).await;
    assert_eq!(st, StatusCode::FORBIDDEN);

    // The CLI: ten by default, -n otherwise, everything after a cursor.
    assert_eq!(positions(&tail(&s, &[])), positions(&all[all.len() - 10..]));
    assert_eq!(positions(&tail(&s, &["-n", "2"])), positions(&all[all.len() - 2..]));
    assert_eq!(tail(&s, &["-n", "0"]), Vec::<Value>::new());
    assert_eq!(positions(&tail(&s, &["--after", "0-0"])), positions(&all));
    // Filtered: the last three of that type, however far back.
    let kind = all.last().unwrap()["type"].as_str().unwrap();
    let of_kind: Vec<Value> = all.iter().filter(|e| e["type"] == kind).cloned().collect();
    assert!(of_kind.len() >= 3, "{kind}");
    assert_eq!(positions(&tail(&s, &["--type", kind, "-n", "3"])), positions(&of_kind[of_kind.len() - 3..]));

    // Followed: the last two, then what is written next, nothing twice.
    let mut follow = Command::new(berth_testkit::berth_bin())
        .args(["-f", "json", "log", "tail", "-n", "2", "--follow"])
        .env("BERTH_URL", &s.url)
        .env("BERTH_TOKEN", ADMIN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).expect("a JSON line"));
        }
    });
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(lines.recv_timeout(Duration::from_secs(20)).expect("the last two"));
    }
    enrol(&s, "later").await;
    while !seen.last().unwrap().to_string().contains("later") {
        seen.push(
            lines.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no entry for later: {seen:?}")),
        );
    }
    let _ = follow.kill();
    let _ = follow.wait();
    assert_eq!(positions(&seen[..2]), positions(&all[all.len() - 2..]), "{seen:?}");
    let mut unique = positions(&seen);
    unique.dedup();
    assert_eq!(unique, positions(&seen), "no entry twice");
    s.assert_no_panic();
}
