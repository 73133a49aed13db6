//! Reads from a hot standby: one past its lag bound is skipped, and a
//! write's token reads that write wherever the read goes.

use std::time::Duration;

use berth_store::testing::TestDatabase;
use berth_testkit::{Server, ADMIN};
use serde_json::json;

use super::Pair;

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    /// Makes a provider; the answer's read-after token.
    async fn provider(&self, name: &str) -> String {
        let r = self
            .http
            .post(format!("{}/placement/resource_providers", self.base))
            .header("x-auth-token", ADMIN)
            .json(&json!({"name": name}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        r.headers().get("berth-read-after").expect("a write's token").to_str().unwrap().to_string()
    }

    /// The providers' names, read with `token` if given.
    async fn names(&self, token: Option<&str>) -> Vec<String> {
        let mut req =
            self.http.get(format!("{}/placement/resource_providers", self.base)).header("x-auth-token", ADMIN);
        if let Some(t) = token {
            req = req.header("berth-read-after", t);
        }
        let body: serde_json::Value = req.send().await.unwrap().json().await.unwrap();
        body["resource_providers"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_string()).collect()
    }
}

async fn standby_sql(pair: &Pair, statement: &str) -> tokio_postgres::Row {
    let (c, conn) = tokio_postgres::connect(&pair.standby.url("berth"), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.query_one(statement, &[]).await.unwrap_or_else(|e| panic!("{statement}: {e:?}"))
}

async fn wait_replayed(pair: &Pair, token: &str) {
    for _ in 0..200 {
        let row = standby_sql(pair, &format!("SELECT pg_last_wal_replay_lsn() >= '{token}'::pg_lsn")).await;
        if row.get::<_, bool>(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the standby never replayed {token}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "`make test-ha` runs it: it starts a primary and a standby of its own"]
async fn a_standby_past_its_lag_bound_is_skipped_and_a_token_reads_its_write() {
    let pair = Pair::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("berth.toml");
    let standby = pair.standby.url("berth");
    std::fs::write(&cfg, format!("read_database_urls = [\"{standby}\"]\nmax_replica_lag_ms = 3000\n")).unwrap();
    let db = TestDatabase { url: pair.primary.url("berth"), name: "berth".into() };
    let s = Server::launch(db, &[("BERTH_MANAGER__ENABLED", "false")], Some(&cfg)).await;
    let c = Client { http: reqwest::Client::new(), base: s.url.clone() };

    let a = c.provider("a").await;
    wait_replayed(&pair, &a).await;
    assert_eq!(c.names(None).await, ["a"]);
    standby_sql(&pair, "SELECT pg_wal_replay_pause()").await;
    let written = c.provider("c").await;
    // Within its bound, the standby serves the list, without the new one...
    assert_eq!(c.names(None).await, ["a"], "a standby within its lag bound serves a list");
    // ...but a read with the write's token is the primary's.
    assert_eq!(c.names(Some(&written)).await, ["a", "c"], "the token reads its write");
    // Past its bound, the standby is skipped.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(c.names(None).await, ["a", "c"], "a standby past its lag bound is skipped");
    standby_sql(&pair, "SELECT pg_wal_replay_resume()").await;
    wait_replayed(&pair, &written).await;
    let d = c.provider("d").await;
    assert_eq!(c.names(Some(&d)).await, ["a", "c", "d"]);
    let metrics = s.metrics().await;
    for by in ["standby", "primary"] {
        assert!(metrics.contains(&format!("berth_db_reads_total{{served_by=\"{by}\"}}")), "{metrics}");
    }
    s.assert_no_panic();
}
