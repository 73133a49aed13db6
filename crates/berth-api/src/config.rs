//! The API's bounds, as configured (`[api]`): how much a request may carry,
//! how long it may take, how many streams and list entries it may get.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// Largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
    /// Deepest nesting of arrays and objects in a JSON body (400 beyond;
    /// the JSON reader stops at 128 whatever this says).
    pub max_json_depth: usize,
    /// Seconds a request may take before it is answered 503 with
    /// `Retry-After` (live streams are exempt).
    pub request_timeout_s: u64,
    /// Seconds a client has to send a request's headers before its
    /// connection is closed.
    pub header_read_timeout_s: u64,
    /// Most entries one page of a list may hold, whatever `limit` asks; the
    /// page size Blazar's lists asked for everything are read and written in.
    pub max_page: usize,
    /// Most allocation requests one `GET /allocation_candidates` answer
    /// holds, whatever `limit` asks (Placement's `max_allocation_candidates`,
    /// bounded here by default: each is about 1 KB of JSON).
    pub max_allocation_candidates: usize,
    /// Most occurrences one recurring lease request may book.
    pub max_occurrences: usize,
    /// Seconds an offer (`POST /v1/offers`) may be booked after it is made,
    /// 1 to 3600 (default 300). Nothing is held meanwhile.
    pub offer_ttl_s: u64,
    /// Live streams (event and log tails) open at once, per caller and in
    /// all (429 beyond).
    pub max_streams_per_caller: usize,
    pub max_streams: usize,
    /// Seconds between keep-alive comments on a quiet live stream.
    pub stream_keepalive_s: u64,
    /// HTTPS on berthd's own listener: the certificate chain (PEM, leaf
    /// first) and its key, read at start and again on SIGHUP. Unset: plain
    /// HTTP (a proxy in front terminates TLS).
    pub tls_cert_file: Option<std::path::PathBuf>,
    pub tls_key_file: Option<std::path::PathBuf>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: 2 * 1024 * 1024,
            max_json_depth: 32,
            request_timeout_s: 60,
            header_read_timeout_s: 10,
            max_page: 1000,
            max_allocation_candidates: 50_000,
            max_occurrences: 100,
            offer_ttl_s: 300,
            max_streams_per_caller: 8,
            max_streams: 256,
            stream_keepalive_s: 15,
            tls_cert_file: None,
            tls_key_file: None,
        }
    }
}

impl ApiConfig {
    /// Refuses settings that would leave the API unusable.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            ("max_body_bytes", self.max_body_bytes as u64),
            ("max_json_depth", self.max_json_depth as u64),
            ("request_timeout_s", self.request_timeout_s),
            ("header_read_timeout_s", self.header_read_timeout_s),
            ("max_page", self.max_page as u64),
            ("max_allocation_candidates", self.max_allocation_candidates as u64),
            ("max_occurrences", self.max_occurrences as u64),
            ("max_streams_per_caller", self.max_streams_per_caller as u64),
            ("max_streams", self.max_streams as u64),
            ("stream_keepalive_s", self.stream_keepalive_s),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("api.{name} must be above 0"));
        }
        if !(1..=3600).contains(&self.offer_ttl_s) {
            return Err("api.offer_ttl_s must be 1 to 3600 (seconds)".into());
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err("api.tls_cert_file and api.tls_key_file go together: name both or neither".into());
        }
        Ok(())
    }
}
