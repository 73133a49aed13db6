//! Who the client is, found as the `openstack` client finds it: a token
//! given outright (`--token`, `BERTH_TOKEN`: noauth's `user:project`, or a
//! Keystone token), else Keystone credentials from `--os-*` options and
//! `OS_*` variables (password or application credential), completed by a
//! cloud of `clouds.yaml` when `--os-cloud`/`OS_CLOUD` names one. With none
//! of these it says how to authenticate; it never guesses a token.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Args, Debug, Default, Clone)]
#[command(next_help_heading = crate::GLOBAL)]
pub struct AuthArgs {
    /// A token sent as X-Auth-Token as it is (noauth: `user:project`).
    #[arg(long, global = true, env = "BERTH_TOKEN")]
    pub token: Option<String>,
    /// A cloud of clouds.yaml.
    #[arg(long = "os-cloud", global = true, env = "OS_CLOUD")]
    pub cloud: Option<String>,
    /// Keystone's URL (`.../v3`), to get a token from the credentials below.
    #[arg(long = "os-auth-url", global = true, env = "OS_AUTH_URL")]
    pub auth_url: Option<String>,
    /// The Keystone user.
    #[arg(long = "os-username", global = true, env = "OS_USERNAME")]
    pub username: Option<String>,
    /// The Keystone user's password.
    #[arg(long = "os-password", global = true, env = "OS_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// The project to act in, by name.
    #[arg(long = "os-project-name", global = true, env = "OS_PROJECT_NAME")]
    pub project_name: Option<String>,
    /// The project to act in, by id.
    #[arg(long = "os-project-id", global = true, env = "OS_PROJECT_ID")]
    pub project_id: Option<String>,
    /// The user's domain (default `Default`).
    #[arg(long = "os-user-domain-name", global = true, env = "OS_USER_DOMAIN_NAME")]
    pub user_domain_name: Option<String>,
    /// The project's domain (default `Default`).
    #[arg(long = "os-project-domain-name", global = true, env = "OS_PROJECT_DOMAIN_NAME")]
    pub project_domain_name: Option<String>,
    /// An application credential's id, instead of a user and password.
    #[arg(long = "os-application-credential-id", global = true, env = "OS_APPLICATION_CREDENTIAL_ID")]
    pub application_credential_id: Option<String>,
    /// The application credential's secret.
    #[arg(
        long = "os-application-credential-secret",
        global = true,
        env = "OS_APPLICATION_CREDENTIAL_SECRET",
        hide_env_values = true
    )]
    pub application_credential_secret: Option<String>,
}

/// The token to send, and the project it acts in (when known).
pub struct Identity {
    pub token: String,
    pub project_id: Option<String>,
}

/// `auth` of a cloud in clouds.yaml: the same names as the options.
#[derive(Debug, Default, Deserialize)]
struct CloudAuth {
    auth_url: Option<String>,
    username: Option<String>,
    password: Option<String>,
    project_name: Option<String>,
    project_id: Option<String>,
    user_domain_name: Option<String>,
    project_domain_name: Option<String>,
    application_credential_id: Option<String>,
    application_credential_secret: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Cloud {
    #[serde(default)]
    auth: CloudAuth,
}

#[derive(Debug, Deserialize)]
struct CloudsFile {
    clouds: std::collections::BTreeMap<String, Cloud>,
}

const HOW: &str = "no credentials: set BERTH_TOKEN (with a noauth berthd: user:project), or OS_AUTH_URL with \
                   OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME (or OS_APPLICATION_CREDENTIAL_ID and _SECRET), \
                   or OS_CLOUD naming a cloud of clouds.yaml";

impl AuthArgs {
    pub fn identity(mut self) -> Result<Identity> {
        if let Some(token) = self.token.take().filter(|t| !t.is_empty()) {
            let project_id = token.split_once(':').map(|(_, p)| p).unwrap_or(&token).to_string();
            return Ok(Identity { project_id: Some(project_id), token });
        }
        if let Some(cloud) = self.cloud.clone() {
            self.complete_from(&cloud)?;
        }
        let Some(auth_url) = self.auth_url.clone() else { bail!(HOW) };
        self.keystone(&auth_url)
    }

    /// Options not given take the cloud's values.
    fn complete_from(&mut self, name: &str) -> Result<()> {
        let path = clouds_yaml().ok_or_else(|| anyhow!("OS_CLOUD={name}, but no clouds.yaml was found"))?;
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut file: CloudsFile =
            serde_norway::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        let cloud = file.clouds.remove(name).ok_or_else(|| anyhow!("{} has no cloud {name:?}", path.display()))?;
        let a = cloud.auth;
        let fill = |mine: &mut Option<String>, theirs: Option<String>| {
            if mine.is_none() {
                *mine = theirs;
            }
        };
        fill(&mut self.auth_url, a.auth_url);
        fill(&mut self.username, a.username);
        fill(&mut self.password, a.password);
        fill(&mut self.project_name, a.project_name);
        fill(&mut self.project_id, a.project_id);
        fill(&mut self.user_domain_name, a.user_domain_name);
        fill(&mut self.project_domain_name, a.project_domain_name);
        fill(&mut self.application_credential_id, a.application_credential_id);
        fill(&mut self.application_credential_secret, a.application_credential_secret);
        Ok(())
    }

    /// A token from Keystone: `POST /v3/auth/tokens`.
    fn keystone(&self, auth_url: &str) -> Result<Identity> {
        let base = auth_url.trim_end_matches('/');
        let base = if base.ends_with("/v3") { base.to_string() } else { format!("{base}/v3") };
        let body = self.auth_body()?;
        let resp = reqwest::blocking::Client::new()
            .post(format!("{base}/auth/tokens?nocatalog"))
            .json(&body)
            .send()
            .with_context(|| format!("reaching Keystone at {base}"))?;
        if resp.status().as_u16() != 201 {
            bail!("Keystone at {base} refused the credentials: {}", resp.status());
        }
        let token = resp
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| anyhow!("Keystone gave no token"))?
            .to_string();
        let doc: Value = resp.json()?;
        let project_id = doc["token"]["project"]["id"].as_str().map(str::to_string);
        Ok(Identity { token, project_id })
    }

    fn auth_body(&self) -> Result<Value> {
        if let (Some(id), Some(secret)) = (&self.application_credential_id, &self.application_credential_secret) {
            return Ok(json!({"auth": {"identity": {"methods": ["application_credential"],
                "application_credential": {"id": id, "secret": secret}}}}));
        }
        let (Some(user), Some(password)) = (&self.username, &self.password) else { bail!(HOW) };
        let user_domain = self.user_domain_name.as_deref().unwrap_or("Default");
        let project_domain = self.project_domain_name.as_deref().unwrap_or("Default");
        let scope = match (&self.project_id, &self.project_name) {
            (Some(id), _) => json!({"project": {"id": id}}),
            (None, Some(name)) => json!({"project": {"name": name, "domain": {"name": project_domain}}}),
            (None, None) => bail!("OS_PROJECT_NAME or OS_PROJECT_ID is needed: Berth acts in a project"),
        };
        Ok(json!({"auth": {
            "identity": {"methods": ["password"],
                         "password": {"user": {"name": user, "password": password, "domain": {"name": user_domain}}}},
            "scope": scope}}))
    }
}

/// Where the openstack client looks: `OS_CLIENT_CONFIG_FILE`, then the
/// current directory, the user's configuration, `/etc/openstack`.
fn clouds_yaml() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(f) = std::env::var_os("OS_CLIENT_CONFIG_FILE") {
        candidates.push(f.into());
    }
    candidates.push("clouds.yaml".into());
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".config/openstack/clouds.yaml"));
    }
    candidates.push("/etc/openstack/clouds.yaml".into());
    candidates.into_iter().find(|p| p.is_file())
}
