//! The run: Placement claims and deletes on one small provider, and lease
//! creations, from clients spread over both berthd, each answer kept.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_testkit::{Server, ADMIN, ALICE};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use uuid::Uuid;

/// The provider's VCPUs: fewer than the clients want at once, so claims
/// compete for them and some are refused.
pub const CAPACITY: i64 = 8;
/// Claims each Placement client keeps before it deletes its oldest.
const KEEP: usize = 3;
const PLACEMENT_CLIENTS: usize = 4;
const LEASE_CLIENTS: usize = 2;
/// Longer than any configured timeout: a request still unanswered then hangs.
const HANG: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Claim,
    Delete,
    Lease,
}

/// One request and its answer (`status` None: no answer within [`HANG`]
/// or the connection failed).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub op: Op,
    /// The consumer claimed or deleted, or the lease made.
    pub id: String,
    pub status: Option<u16>,
    pub retry_after: bool,
    pub body: Value,
    pub started: Instant,
    pub finished: Instant,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// A provider with [`CAPACITY`] VCPUs.
pub async fn provider(s: &Server) -> String {
    let (st, rp) = s.post("/placement/resource_providers", ADMIN, json!({"name": "ha"})).await;
    assert!(st.is_success(), "{rp}");
    let (_, rps) = s.get("/placement/resource_providers?name=ha", ADMIN).await;
    let uuid = rps["resource_providers"][0]["uuid"].as_str().unwrap().to_string();
    let inv = json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": CAPACITY}}});
    let (st, body) = s.put(&format!("/placement/resource_providers/{uuid}/inventories"), ADMIN, inv).await;
    assert!(st.is_success(), "{body}");
    uuid
}

/// A lease on the one host whose start hook the receiver holds until
/// released: claimed before the switch, finished after it.
pub async fn held_lease(s: &Server) -> String {
    let (st, l) = s
        .post(
            "/v1/leases",
            ALICE,
            json!({"name": "held", "start_date": "now", "end_date": "2999-01-01 00:00",
                   "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]}),
        )
        .await;
    assert_eq!(st.as_u16(), 201, "{l}");
    l["lease"]["id"].as_str().unwrap().to_string()
}

pub struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Vec<Outcome>>>,
}

impl Load {
    pub fn start(servers: &[&Server], provider: &str) -> Load {
        Load::named(servers, provider, "l")
    }

    /// As [`Load::start`], its leases named `<tag>-…`: loads running side
    /// by side make leases of distinct names.
    pub fn named(servers: &[&Server], provider: &str, tag: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let http = reqwest::Client::builder().timeout(HANG).build().unwrap();
        let mut clients = Vec::new();
        for i in 0..PLACEMENT_CLIENTS + LEASE_CLIENTS {
            let (base, http, stop, provider) =
                (servers[i % servers.len()].url.clone(), http.clone(), stop.clone(), provider.to_string());
            let tag = tag.to_string();
            clients.push(tokio::spawn(async move {
                let c = Client { base, http };
                if i < PLACEMENT_CLIENTS {
                    c.claims(&provider, &stop).await
                } else {
                    c.leases(&format!("{tag}-{i}"), &stop).await
                }
            }));
        }
        Load { stop, clients }
    }

    pub async fn stop(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for c in self.clients {
            all.extend(c.await.unwrap());
        }
        all
    }
}

struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    async fn send(&self, op: Op, id: &str, method: Method, path: &str, token: &str, body: Option<Value>) -> Outcome {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("x-auth-token", token)
            .header("openstack-api-version", "placement 1.39");
        if let Some(b) = body {
            req = req.json(&b);
        }
        let started = Instant::now();
        let (status, retry_after, body) = match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let retry_after = r.headers().contains_key("retry-after");
                let text = r.text().await.unwrap_or_default();
                (Some(status), retry_after, serde_json::from_str(&text).unwrap_or(Value::Null))
            }
            Err(e) => (None, false, Value::String(e.to_string())),
        };
        Outcome { op, id: id.to_string(), status, retry_after, body, started, finished: Instant::now() }
    }

    /// Claims a VCPU for a new consumer, again and again; keeps [`KEEP`]
    /// and deletes the oldest beyond them.
    async fn claims(&self, provider: &str, stop: &AtomicBool) -> Vec<Outcome> {
        let (mut out, mut kept) = (Vec::new(), Vec::new());
        while !stop.load(Ordering::Relaxed) {
            let consumer = Uuid::new_v4().to_string();
            let claim = json!({"allocations": {provider: {"resources": {"VCPU": 1}}},
                               "project_id": "p1", "user_id": "alice", "consumer_generation": null,
                               "consumer_type": "INSTANCE"});
            let path = format!("/placement/allocations/{consumer}");
            let o = self.send(Op::Claim, &consumer, Method::PUT, &path, ADMIN, Some(claim)).await;
            let refused = o.status == Some(409);
            // A claim without a clear answer (a 503 during the switch) may
            // have been made: it is deleted in its turn too (404 if not),
            // or it would hold its VCPU to the end.
            if !refused {
                kept.push(consumer);
            }
            out.push(o);
            // Refused, it gives one back, so the clients never all wait on
            // each other.
            if kept.len() > KEEP || (refused && !kept.is_empty()) {
                let oldest = kept.remove(0);
                let path = format!("/placement/allocations/{oldest}");
                let o = self.send(Op::Delete, &oldest, Method::DELETE, &path, ADMIN, None).await;
                // A delete without a clear answer (a 503 during the switch)
                // may not have been made: it is tried again in its turn, or
                // its VCPU would stay held and, leaked by every client, fill
                // the provider for the rest of the run.
                if !matches!(o.status, Some(s) if s < 500) {
                    kept.insert(0, oldest);
                }
                out.push(o);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        out
    }

    /// Leases that start now and end a second later: their lease events
    /// fall due during the run.
    async fn leases(&self, name: &str, stop: &AtomicBool) -> Vec<Outcome> {
        let mut out = Vec::new();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let end = chrono::Utc::now() + chrono::Duration::seconds(2);
            let body = json!({"name": format!("{name}-{n}"), "start_date": "now",
                              "end_date": end.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                              "reservations": [{"resource_type": "virtual:thing", "n": n}]});
            let o = self.send(Op::Lease, "", Method::POST, "/v1/leases", ALICE, Some(body)).await;
            let id = o.body["lease"]["id"].as_str().unwrap_or_default().to_string();
            out.push(Outcome { id, ..o });
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        out
    }
}
