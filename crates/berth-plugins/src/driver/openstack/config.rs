//! The `openstack` driver's settings.

use serde::{Deserialize, Serialize};

use crate::driver::default_timeout_ms;

/// `[plugins.drivers."<type>"]` with `driver = "openstack"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenStackConfig {
    /// Keystone's v3 endpoint, e.g. `http://keystone:5000/v3`. When absent
    /// berthd fills it, and every credential below, from `[keystone]` (the
    /// service credentials Berth validates tokens with).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub auth_url: String,
    /// Password authentication (scoped to `project_name`)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default = "default_domain")]
    pub user_domain_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_name: Option<String>,
    #[serde(default = "default_domain")]
    pub project_domain_name: String,
    /// ...or an application credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_credential_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_credential_secret: Option<String>,
    /// Which of the catalog's compute endpoints: `public`, `internal`, `admin`.
    #[serde(default = "default_interface")]
    pub interface: String,
    /// The catalog's region; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Sent as `OpenStack-API-Version: compute <this>`.
    #[serde(default = "default_microversion")]
    pub compute_microversion: String,
    /// The aggregate reservable hosts wait in (Blazar's `freepool`); when
    /// absent hosts are only added to and removed from the lease's aggregate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_pool: Option<String>,
    /// Each request to Keystone or Nova.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Retries of a request Nova answered 503, with exponential backoff from
    /// `retry_min_ms`.
    #[serde(default = "default_retries")]
    pub retries: usize,
    #[serde(default = "default_retry_min_ms")]
    pub retry_min_ms: u64,
}

fn default_domain() -> String {
    "Default".into()
}
fn default_interface() -> String {
    "public".into()
}
fn default_microversion() -> String {
    "2.53".into()
}
fn default_retries() -> usize {
    3
}
fn default_retry_min_ms() -> u64 {
    500
}

impl OpenStackConfig {
    /// Whether berthd should fill the credentials from `[keystone]`.
    pub fn borrows_credentials(&self) -> bool {
        self.auth_url.is_empty()
    }
}
