//! Configuration: defaults, then a TOML file, then `BERTH_*` variables.

use std::path::Path;

use anyhow::{Context, Result};
use berth_api::AuthMode;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// Connections a pool keeps for requests beyond the manager's.
const MIN_FREE_CONNECTIONS: usize = 2;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `BERTH_DATABASE_URL`
    pub database_url: String,
    /// `[database]`: TLS (libpq's `sslmode`, `sslrootcert`, `sslcert`,
    /// `sslkey`) for every URL that names none, and `password_file`.
    #[serde(default)]
    pub database: crate::database::DatabaseConfig,
    /// `BERTH_READ_DATABASE_URLS`: hot standbys that may serve reads that
    /// may be slightly stale (lists, usages, allocation candidates, the
    /// calendar); writes and every decision stay on `database_url`.
    pub read_database_urls: Vec<String>,
    /// `BERTH_MAX_REPLICA_LAG_MS`: a standby further behind than this is
    /// skipped until it catches up.
    pub max_replica_lag_ms: u64,
    /// `BERTH_LISTEN`
    pub listen: String,
    /// `BERTH_AUTH`: `noauth` (local use), `keystone` or `jwt`.
    pub auth: AuthMode,
    /// `BERTH_ALLOW_INSECURE_NOAUTH`: serve noauth on an address other than
    /// loopback (anyone who reaches it can be admin).
    pub allow_insecure_noauth: bool,
    /// `[keystone]`: Berth's own credentials, the validation cache, timeouts.
    #[serde(default)]
    pub keystone: berth_api::auth::keystone::KeystoneConfig,
    /// `[jwt]`: the key set, issuer, audience and claims of JWT bearer tokens.
    #[serde(default)]
    pub jwt: berth_api::auth::jwt::JwtConfig,
    /// `BERTH_POLICY_FILE`: oslo.policy YAML overriding rules' defaults
    /// (`berthd policy list` shows every rule).
    pub policy_file: Option<std::path::PathBuf>,
    /// `BERTH_LOG`: a tracing filter.
    pub log: String,
    /// `BERTH_POOL_SIZE`: database connections.
    pub pool_size: usize,
    /// `BERTH_POOL_WAIT_TIMEOUT_MS`: longest a request waits for a free
    /// database connection (then 503).
    pub pool_wait_timeout_ms: u64,
    /// `BERTH_CONNECT_TIMEOUT_MS`: longest opening a database connection
    /// may take (then 503).
    pub connect_timeout_ms: u64,
    /// `BERTH_STATEMENT_TIMEOUT_MS`: longest one SQL statement of a request
    /// or of the manager may run (then 503).
    pub statement_timeout_ms: u64,
    /// `BERTH_CLAIM_LANES`: claim transactions in flight at once; claims
    /// waiting meanwhile are decided together in the next one. Unset: one
    /// per two cores of this machine, 2 to 8, at most a quarter of
    /// `pool_size` ([`berth_store::commands::sized_claim_lanes`]).
    pub claim_lanes: Option<usize>,
    /// `BERTH_CLAIM_GATHER_US`: longest a claim lane waits for a fuller
    /// batch while another lane's batch is in flight (0: never waits).
    pub claim_gather_us: u64,
    /// `BERTH_CLEANING_TIME`: minutes a host stays unreservable after a
    /// lease on it ends (Blazar's `cleaning_time`); a host's own
    /// `cleaning_time` capability overrides it. Every replica must be
    /// given the same.
    pub cleaning_time: u32,
    /// `[plugins]`: enabled resource types, drivers, external types.
    #[serde(default)]
    pub plugins: berth_plugins::PluginsConfig,
    /// `[policy]`: lease policy (maximum duration, extension window, exempt
    /// projects, external policy service).
    #[serde(default)]
    pub policy: berth_app::PolicyConfig,
    /// `[api]`: request bounds and timeouts (`BERTH_API__MAX_BODY_BYTES`, ...).
    #[serde(default)]
    pub api: berth_api::ApiConfig,
    /// `[manager]`: fires lease events (`BERTH_MANAGER__POLL_INTERVAL_MS`, ...).
    #[serde(default)]
    pub manager: berth_manager::ManagerConfig,
    /// `[notifications]`: lease notifications in Blazar's shapes and the
    /// sinks they go to (none by default).
    #[serde(default)]
    pub notifications: berth_notify::NotificationsConfig,
    /// `BERTH_CLOCK_SKEW_WARN_S`: warn when this host's clock is further
    /// than this from the database's (decisions use the database's clock
    /// either way).
    pub clock_skew_warn_s: f64,
    /// `BERTH_DEMO_INVENTORY`: make four demo hosts at start when the
    /// database has no provider yet (`berthd dev` turns it on).
    pub demo_inventory: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database_url: "postgresql://postgres@127.0.0.1:5432/berth".into(),
            database: crate::database::DatabaseConfig::default(),
            read_database_urls: Vec::new(),
            max_replica_lag_ms: 1_000,
            listen: "127.0.0.1:8778".into(),
            auth: AuthMode::Noauth,
            allow_insecure_noauth: false,
            keystone: berth_api::auth::keystone::KeystoneConfig::default(),
            jwt: berth_api::auth::jwt::JwtConfig::default(),
            policy_file: None,
            log: "info".into(),
            pool_size: 32,
            pool_wait_timeout_ms: 5_000,
            connect_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
            claim_lanes: None,
            claim_gather_us: u64::try_from(berth_store::commands::DEFAULT_CLAIM_GATHER.as_micros()).unwrap_or(u64::MAX),
            cleaning_time: 0,
            plugins: berth_plugins::PluginsConfig::default(),
            policy: berth_app::PolicyConfig::default(),
            manager: berth_manager::ManagerConfig::default(),
            notifications: berth_notify::NotificationsConfig::default(),
            clock_skew_warn_s: berth_api::clock::DEFAULT_WARN_S,
            api: berth_api::ApiConfig::default(),
            demo_inventory: false,
        }
    }
}

impl Config {
    /// The claim lanes: as configured, else sized to this machine's cores and the pool.
    pub fn claim_lanes(&self) -> usize {
        self.claim_lanes
            .unwrap_or_else(|| berth_store::commands::sized_claim_lanes(berth_store::commands::cores(), self.pool_size))
    }

    /// The database pool as configured.
    pub fn pool(&self) -> Result<berth_store::PoolSettings> {
        let ms = std::time::Duration::from_millis;
        Ok(berth_store::PoolSettings {
            max_size: self.pool_size,
            wait_timeout: Some(ms(self.pool_wait_timeout_ms)),
            connect_timeout: Some(ms(self.connect_timeout_ms)),
            statement_timeout: Some(ms(self.statement_timeout_ms)),
            tls: self.database.tls()?,
            password: self.database.password(),
        })
    }

    /// For `migrate` and `replay`: two connections, no timeouts (a replay
    /// of a long log runs as long as it takes), the database reached as
    /// `serve` reaches it.
    pub fn one_off_pool(&self) -> Result<berth_store::PoolSettings> {
        Ok(berth_store::PoolSettings {
            max_size: 2,
            tls: self.database.tls()?,
            password: self.database.password(),
            ..berth_store::PoolSettings::default()
        })
    }

    /// What each database URL does about TLS, a line each, its files read
    /// (for `berthd check-config`).
    pub fn describe_tls(&self) -> Result<Vec<String>> {
        let pool = self.pool()?;
        let urls = std::iter::once(("database_url", &self.database_url))
            .chain(self.read_database_urls.iter().map(|u| ("read_database_urls", u)));
        urls.map(|(key, url)| {
            let tls = berth_store::describe_tls(url, &pool).with_context(|| key.to_string())?;
            Ok(format!("{key}: {tls}"))
        })
        .collect()
    }

    /// Defaults, then `file`, then `BERTH_*` variables. A key this
    /// configuration does not have is refused wherever it is written (a
    /// misspelt one would otherwise leave its setting at the default), except
    /// in variables whose first part names no key at all: `BERTH_` is shared
    /// with the CLI (`BERTH_URL`, `BERTH_TOKEN`) and tools. Relative exec
    /// plugin programs are found from the file's directory.
    pub fn load(file: Option<&Path>) -> Result<Config> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        if let Some(f) = file {
            anyhow::ensure!(f.exists(), "configuration file {} does not exist", f.display());
            fig = fig.merge(Toml::file_exact(f));
        }
        let env = Env::prefixed("BERTH_")
            .split("__")
            // Keys are dotted by now (`api.max_body_bytes`).
            .filter(|key| {
                key.as_str().split('.').next().is_some_and(|first| KEYS.iter().any(|k| first.eq_ignore_ascii_case(k)))
            });
        let fig = fig.merge(env);
        let merged: figment::value::Value = fig.extract().context("reading the configuration")?;
        let mut cfg: Config = if crate::secrets::named(&merged) {
            // Secrets named by file: read, then the configuration as if
            // they had been written in it.
            let resolved = crate::secrets::resolve(merged, "")?;
            Figment::from(Serialized::defaults(resolved)).extract().context("reading the configuration")?
        } else {
            fig.extract().context("reading the configuration")?
        };
        if let Some(dir) = file.and_then(Path::parent) {
            cfg.find_programs_from(dir);
        }
        cfg.lend_keystone_credentials();
        Ok(cfg)
    }

    /// An `openstack` driver without `auth_url` acts with `[keystone]`'s
    /// service credentials, so an operator configures them once.
    fn lend_keystone_credentials(&mut self) {
        let k = &self.keystone;
        for driver in self.plugins.drivers.values_mut() {
            if let berth_plugins::driver::DriverConfig::Openstack(os) = driver {
                if os.borrows_credentials() {
                    os.auth_url = k.auth_url.clone();
                    os.username = k.username.clone();
                    os.password = k.password.clone();
                    os.user_domain_name = k.user_domain_name.clone();
                    os.project_name = k.project_name.clone();
                    os.project_domain_name = k.project_domain_name.clone();
                    os.application_credential_id = k.application_credential_id.clone();
                    os.application_credential_secret = k.application_credential_secret.clone();
                }
            }
        }
    }

    /// Every exec driver's program given as a relative path (not a bare
    /// name, which is looked up on `PATH`) is taken from `dir`.
    fn find_programs_from(&mut self, dir: &Path) {
        for driver in self.plugins.drivers.values_mut().chain(self.plugins.external.values_mut()) {
            if let berth_plugins::driver::DriverConfig::Exec(exec) = driver {
                if exec.program.is_relative() && exec.program.components().count() > 1 {
                    exec.program = dir.join(&exec.program);
                }
            }
        }
    }

    /// The pool leaves connections for requests beside those the manager
    /// keeps (when it runs here): with fewer, every request would wait out
    /// `pool_wait_timeout_ms` behind the manager's claims.
    pub fn check_pool(&self) -> Result<(), String> {
        let kept =
            if self.manager.enabled { berth_manager::kept_connections(&self.manager, self.pool_size) } else { 0 };
        let least = kept + MIN_FREE_CONNECTIONS;
        if self.pool_size < least {
            return Err(format!(
                "pool_size {} is too small: the manager keeps {kept} connections for its claims \
                 and requests need {MIN_FREE_CONNECTIONS}, so at least {least}",
                self.pool_size
            ));
        }
        Ok(())
    }

    /// Every exec driver's program exists and may be run, checked at start
    /// rather than at the first lease that needs it.
    pub fn check_programs(&self) -> Result<()> {
        let drivers = self.plugins.drivers.iter().map(|(t, d)| ("drivers", t, d));
        for (section, name, driver) in drivers.chain(self.plugins.external.iter().map(|(t, d)| ("external", t, d))) {
            if let berth_plugins::driver::DriverConfig::Exec(exec) = driver {
                exec.check_program()
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("[plugins.{section}.{name:?}] program {}", exec.program.display()))?;
            }
        }
        Ok(())
    }
}

/// The top-level keys (a test keeps this in step with [`Config`]).
const KEYS: &[&str] = &[
    "database_url",
    "database",
    "read_database_urls",
    "max_replica_lag_ms",
    "listen",
    "auth",
    "allow_insecure_noauth",
    "keystone",
    "jwt",
    "policy_file",
    "log",
    "pool_size",
    "pool_wait_timeout_ms",
    "connect_timeout_ms",
    "statement_timeout_ms",
    "claim_lanes",
    "claim_gather_us",
    "cleaning_time",
    "plugins",
    "policy",
    "api",
    "manager",
    "notifications",
    "clock_skew_warn_s",
    "demo_inventory",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_the_manager_would_fill_is_refused() {
        let least = 3 + MIN_FREE_CONNECTIONS;
        let manager = berth_manager::ManagerConfig { claim_lanes: Some(3), ..Default::default() };
        let cfg = |pool_size| Config { pool_size, manager: manager.clone(), ..Config::default() };
        assert!(cfg(least).check_pool().is_ok());
        assert!(cfg(Config::default().pool_size).check_pool().is_ok());
        let e = cfg(least - 1).check_pool().unwrap_err();
        assert!(e.contains("pool_size") && e.contains(&least.to_string()), "{e}");
        // A berthd that runs no manager keeps none of its connections.
        let mut without_manager = cfg(MIN_FREE_CONNECTIONS);
        without_manager.manager.enabled = false;
        assert!(without_manager.check_pool().is_ok());
        without_manager.pool_size = MIN_FREE_CONNECTIONS - 1;
        assert!(without_manager.check_pool().is_err());
    }

    #[test]
    fn the_top_level_keys_are_the_configurations() {
        let value = figment::value::Value::serialize(Config::default()).unwrap();
        let dict = value.into_dict().unwrap();
        let mut fields: Vec<&str> = dict.keys().map(String::as_str).collect();
        fields.push("policy_file");
        fields.sort_unstable();
        fields.dedup();
        let mut keys = KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(fields, keys);
    }

    #[test]
    fn claim_lanes_are_sized_to_the_machine_unless_set() {
        use berth_store::commands::{cores, sized_claim_lanes};
        let cfg = Config::default();
        assert_eq!(cfg.claim_lanes(), sized_claim_lanes(cores(), cfg.pool_size));
        assert_eq!(Config { pool_size: 8, ..Config::default() }.claim_lanes(), 2);
        assert_eq!(Config { claim_lanes: Some(5), ..Config::default() }.claim_lanes(), 5);
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/berth.example.toml");
        assert_eq!(Config::load(Some(&example)).unwrap().claim_lanes, None, "the example leaves them sized");
    }

    #[test]
    fn the_example_configuration_loads_and_its_plugins_check() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/berth.example.toml");
        let cfg = Config::load(Some(&example)).unwrap();
        assert!(cfg.plugins.enabled.iter().any(|t| t == "virtual:floatingip"), "{:?}", cfg.plugins);
        assert!(cfg.plugins.external.contains_key("virtual:floatingip"));
        cfg.plugins.check().unwrap();
        assert_eq!(cfg.policy.max_lease_duration, Some(604800));
        assert_eq!(cfg.api, berth_api::ApiConfig::default(), "the example shows the defaults");
        berth_app::Policy::from_config(&cfg.policy).unwrap();
        assert_eq!(cfg.keystone.cache_ttl_s, 300);
        assert_eq!(cfg.jwt.audience, ["berth"]);
        assert_eq!(cfg.notifications.sinks.len(), 2);
        berth_notify::check(&cfg.notifications).unwrap();
        let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/policy.example.yaml");
        let rules = berth_api::Rules::with_file(&std::fs::read_to_string(policy).unwrap()).unwrap();
        assert_eq!(rules.overridden().len(), 3);
    }

    #[test]
    fn an_openstack_driver_without_auth_url_uses_the_keystone_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("berth.toml");
        std::fs::write(
            &file,
            r#"
[keystone]
auth_url = "http://keystone.test:5000/v3"
username = "berth"
password = "s3cret"
project_name = "service"

[plugins.drivers."physical:host"]
driver = "openstack"
free_pool = "freepool"

[plugins.drivers."virtual:instance"]
driver = "openstack"
auth_url = "http://other.test:5000/v3"
application_credential_id = "id"
application_credential_secret = "secret"
"#,
        )
        .unwrap();
        let cfg = Config::load(Some(&file)).unwrap();
        let os = |t: &str| match &cfg.plugins.drivers[t] {
            berth_plugins::driver::DriverConfig::Openstack(c) => c.clone(),
            other => panic!("{other:?}"),
        };
        let host = os("physical:host");
        assert_eq!(host.auth_url, "http://keystone.test:5000/v3");
        assert_eq!((host.username.as_deref(), host.password.as_deref()), (Some("berth"), Some("s3cret")));
        assert_eq!(host.project_name.as_deref(), Some("service"));
        let instance = os("virtual:instance");
        assert_eq!(instance.auth_url, "http://other.test:5000/v3", "its own credentials stand");
        assert_eq!(instance.username, None);
        cfg.plugins.check().unwrap();
    }
}
