//! `berth lease share LEASE PROJECT...` (or `--none`) and
//! `berth lease list --shared`: a lease's reserved capacity shared with
//! other projects, and the leases shared with yours.

use anyhow::Result;
use reqwest::Method;
use serde_json::json;

use crate::client::Client;

/// The columns of the leases shared with you: only what the owner shows.
const SHARED_COLUMNS: &[&str] = &["id", "start_date", "end_date", "status"];

/// Shares lease `id` with `projects` (none: with no project); prints its sharing.
pub(crate) fn share(client: &Client, id: &str, projects: Vec<String>) -> Result<()> {
    let out =
        client.call(Method::PUT, &format!("/v1/leases/{id}/shared_with"), Some(&json!({"projects": projects})))?;
    client.print_object(&out)
}

/// The leases shared with the caller's project: a page when asked for one.
pub(crate) fn list(client: &Client, limit: Option<u32>, marker: Option<String>) -> Result<()> {
    let mut q = Vec::new();
    if let Some(l) = limit {
        q.push(format!("limit={l}"));
    }
    if let Some(m) = marker {
        q.push(format!("marker={m}"));
    }
    let path =
        if q.is_empty() { "/v1/leases/shared".to_string() } else { format!("/v1/leases/shared?{}", q.join("&")) };
    let leases = client.get(&path)?["leases"].as_array().cloned().unwrap_or_default();
    client.print_list(&leases, SHARED_COLUMNS)
}
