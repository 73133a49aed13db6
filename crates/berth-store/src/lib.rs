//! berth-store: everything Berth keeps in PostgreSQL.
//!
//! The connection pool and migrations, the append-only log (append with
//! per-stream optimistic concurrency, read with a cursor that never skips),
//! the projections and the one function that applies an event to them, the
//! commands (each one transaction at READ COMMITTED that locks, decides with
//! berth-core's rules, appends and applies), the queries over projections,
//! and replay; with the `testing` feature, fresh test databases.
//!
//! Nothing outside this crate writes SQL. This crate knows nothing of HTTP.

#![warn(clippy::arithmetic_side_effects)]

mod client;
pub mod clock;
pub mod commands;
pub mod log;
pub mod migrate;
pub mod notifier;
pub mod notify;
pub mod offers;
pub mod queries;
pub mod replay;
pub mod replicas;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tls;

mod conn;
#[cfg(test)]
mod conn_tests;
mod error;
mod lock;
#[cfg(test)]
mod plan_checks;
// Only projection::apply writes projection tables (the compiler keeps it so).
mod projection;
mod quota;
mod refuse;
mod sql;
#[cfg(test)]
mod tls_tests;
mod tx;
#[cfg(test)]
mod tx_tests;

pub use clock::ClockOffset;
pub use error::StoreError;
pub use log::{Cursor, RecordedEvent};

use std::time::Duration;

use deadpool_postgres::{PoolError, Runtime, Timeouts};

use conn::{Checkout, Pool};

/// How much longer than `statement_timeout` a use of a connection waits on
/// the server before Berth gives up on it (crate::conn): the server's own
/// timeout, which leaves the connection usable, goes first.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// How the pool waits for the database. `None` waits as long as it takes.
#[derive(Debug, Clone, Default)]
pub struct PoolSettings {
    /// Most connections.
    pub max_size: usize,
    /// Longest wait for a free connection, and to open a new one.
    pub wait_timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    /// Longest a statement may run on the server (`statement_timeout`);
    /// and, with [`DEADLINE_MARGIN`], longest a read or one attempt of a
    /// command's transaction waits on the server in all (crate::conn).
    pub statement_timeout: Option<Duration>,
    /// TLS for what the URL does not say (`[database]`).
    pub tls: tls::TlsParams,
    /// The password, where the URL names none (`[database] password_file`).
    pub password: Option<Password>,
}

/// A database password, kept out of `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
}

/// How busy the pool is: connections allowed, open and idle, and requests
/// waiting for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    pub max: usize,
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
}

/// The reclaim lead unless configured: two minutes, the notice AWS gives
/// before it interrupts a Spot instance.
pub const DEFAULT_RECLAIM_LEAD_S: i64 = 120;

/// A handle on Berth's database: a pool of connections. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// For connections of their own (notifications): the pool's settings,
    /// its host list and timeouts included. Shared: the HTTP layers clone
    /// the store several times a request, and a deep copy of the settings
    /// (a dozen strings and lists) cost about 5 % of a claim's CPU.
    config: std::sync::Arc<Database>,
    /// Claims waiting to be decided together (commands::claims).
    claims: std::sync::Arc<commands::Claims>,
    /// The database's clock between readings (clock::Carried).
    carried: std::sync::Arc<clock::Carried>,
    /// How long a host stays unreservable after a lease on it ends, unless
    /// it says otherwise (`cleaning_time`; `queries::fit`).
    cleaning: chrono::Duration,
    /// Whether a new lease breaks best fit's ties by a draw of its own
    /// rather than by host name (`commands::leases::plan`).
    drawn_ties: bool,
    /// Whether new leases read every host rather than those near their
    /// window (`commands::leases::small`).
    small_cloud: std::sync::Arc<commands::SmallCloud>,
    /// Hot standbys for reads that may be stale (replicas).
    replicas: Option<std::sync::Arc<replicas::Replicas>>,
    /// How long a use of a connection waits on the server (crate::conn).
    deadline: Option<Duration>,
    /// How long before an owner needs lent capacity its loan is reclaimed
    /// (commands::loans).
    reclaim_lead: chrono::Duration,
}

impl Store {
    /// Connects a pool of at most `max_size` connections to `url`, waiting
    /// as long as the database takes (for tools such as replay).
    pub fn connect(url: &str, max_size: usize) -> Result<Store, StoreError> {
        Store::connect_with(url, &PoolSettings { max_size, ..PoolSettings::default() })
    }

    /// Connects a pool to `url` that gives up as `settings` say: a request
    /// then fails as unavailable instead of waiting on a database that does
    /// not answer.
    pub fn connect_with(url: &str, settings: &PoolSettings) -> Result<Store, StoreError> {
        let (pool, config) = open_pool(url, settings, settings.wait_timeout)?;
        let lanes = commands::sized_claim_lanes(commands::cores(), settings.max_size);
        Ok(Store {
            pool,
            config: std::sync::Arc::new(config),
            claims: std::sync::Arc::new(commands::Claims::new(lanes, commands::DEFAULT_CLAIM_GATHER)),
            carried: Default::default(),
            replicas: None,
            cleaning: chrono::Duration::zero(),
            drawn_ties: false,
            small_cloud: Default::default(),
            deadline: deadline(settings),
            reclaim_lead: chrono::Duration::seconds(DEFAULT_RECLAIM_LEAD_S),
        })
    }

    /// Reclaims lent capacity `lead` before an owner needs it
    /// (commands::loans): the time a plugin has to empty it.
    pub fn with_reclaim_lead(mut self, lead: std::time::Duration) -> Store {
        self.reclaim_lead = chrono::Duration::from_std(lead).unwrap_or(chrono::Duration::MAX);
        self
    }

    /// Decides claims in at most `lanes` transactions at once (see
    /// commands::claims; about the database server's cores).
    pub fn with_claim_lanes(mut self, lanes: usize) -> Store {
        self.claims = std::sync::Arc::new(commands::Claims::new(lanes, self.claims.longest_gather()));
        self
    }

    /// Lets a claim lane wait at most `gather` for a fuller batch while
    /// another lane's is in flight (see commands::claims; zero: never).
    pub fn with_claim_gather(mut self, gather: std::time::Duration) -> Store {
        self.claims = std::sync::Arc::new(commands::Claims::new(self.claims.lanes(), gather));
        self
    }

    /// Keeps every host unreservable for `cleaning` after a lease on it
    /// ends (Blazar's `cleaning_time`), unless the host has a
    /// `cleaning_time` capability of its own.
    pub fn with_cleaning_time(mut self, cleaning: std::time::Duration) -> Store {
        self.cleaning = chrono::Duration::from_std(cleaning).unwrap_or(chrono::Duration::MAX);
        self
    }

    /// Breaks best fit's ties among equally good hosts, for new leases, by
    /// a draw of each lease's own instead of by host name: creations at
    /// once then spread over hosts alike instead of all queueing on the
    /// first by name (a tighter fit still wins). Off, choices are
    /// deterministic (as tests want them); berthd turns it on.
    pub fn with_drawn_ties(mut self, on: bool) -> Store {
        self.drawn_ties = on;
        self
    }

    /// Lets new leases read every host, rather than the hosts near their
    /// window, on a cloud of at most `hosts` hosts
    /// (`commands::leases::small`; zero: always near, where it applies;
    /// `usize::MAX`: never).
    pub fn with_small_cloud(mut self, hosts: usize) -> Store {
        self.small_cloud = std::sync::Arc::new(commands::SmallCloud::new(hosts));
        self
    }

    /// How a heal places (`commands::leases::heal`).
    pub(crate) fn placing(&self) -> commands::Placing {
        commands::Placing { cleaning: self.cleaning_time(), small: self.small_cloud.hosts() }
    }

    /// The cleaning time of hosts that name none.
    pub fn cleaning_time(&self) -> chrono::Duration {
        self.cleaning
    }

    /// How long a read, or one attempt of a command's transaction, waits on
    /// the server before it is given up (crate::conn); `None`: as long as
    /// it takes.
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// A connection of the pool, its deadline armed (crate::conn).
    pub(crate) async fn client(&self) -> Result<Checkout, StoreError> {
        let object = self.pool.get().await.map_err(|e| match e {
            PoolError::Timeout(_) => StoreError::PoolTimeout(e.to_string()),
            PoolError::Backend(db) => StoreError::Db(db),
            e => StoreError::Pool(e.to_string()),
        })?;
        Ok(Checkout::new(object))
    }

    /// The pool's figures (for `/metrics`): the pool itself stays inside
    /// the store, so that nothing else runs SQL on it.
    pub fn pool_status(&self) -> PoolStatus {
        let s = self.pool.status();
        PoolStatus { max: s.max_size, open: s.size, idle: s.available, waiting: s.waiting }
    }

    /// Whether the configured database answers, with what is wrong said
    /// plainly for an operator starting berthd: the server cannot be
    /// reached, the database is not there, or the credentials are refused.
    pub async fn reach(&self) -> anyhow::Result<()> {
        let Err(e) = self.ping().await else { return Ok(()) };
        let c = &self.config.config;
        let hosts: Vec<String> = c
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let host = match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                };
                // One port for every host, or one per host.
                let port = c.get_ports().get(i).or(c.get_ports().first()).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect();
        let target = format!("database {:?} on {}", c.get_dbname().unwrap_or("postgres"), hosts.join(","));
        let code = match &e {
            StoreError::Db(db) => db.code().map(|c| c.code().to_owned()),
            _ => None,
        };
        Err(match code.as_deref() {
            Some("3D000") => anyhow::anyhow!(
                "the {target} does not exist: create it (createdb) or fix database_url (BERTH_DATABASE_URL)"
            ),
            Some("28000" | "28P01") => anyhow::anyhow!("the {target} refused Berth's credentials: {e}"),
            _ => anyhow::anyhow!("the {target} cannot be reached (database_url, BERTH_DATABASE_URL): {e}"),
        })
    }

    /// Whether the database answers.
    async fn ping(&self) -> Result<(), StoreError> {
        let c = self.client().await?;
        c.simple_query("SELECT 1").await?;
        Ok(())
    }
}

/// A database as Berth connects to it: tokio-postgres' settings and the
/// TLS connector its URL asks for (`tls`). Connections outside the pool
/// (notifications, replay's reader) are opened with both too.
#[derive(Clone)]
pub(crate) struct Database {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: tokio_postgres_rustls::MakeRustlsConnect,
}

impl Database {
    /// A connection of its own, outside the pool.
    pub(crate) async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<
                tokio_postgres::Socket,
                <tokio_postgres_rustls::MakeRustlsConnect as tokio_postgres::tls::MakeTlsConnect<
                    tokio_postgres::Socket,
                >>::Stream,
            >,
        ),
        tokio_postgres::Error,
    > {
        self.config.connect(self.tls.clone()).await
    }
}

/// What connections to `url` under `settings` do about TLS, in a line (for
/// `berthd check-config`); an error names what is wrong with its TLS
/// parameters or files.
pub fn describe_tls(url: &str, settings: &PoolSettings) -> Result<String, StoreError> {
    let (_, tls) = database_config(url, settings)?;
    tls::connector(&tls).map_err(StoreError::Settings)?;
    Ok(tls.describe())
}

/// tokio-postgres' settings for `url`, with what `settings` adds, and the
/// TLS they ask for.
fn database_config(
    url: &str,
    settings: &PoolSettings,
) -> Result<(tokio_postgres::Config, tls::TlsSettings), StoreError> {
    let (url, mut named) = tls::split_url(url).map_err(StoreError::Settings)?;
    let mut config: tokio_postgres::Config = url.parse().map_err(StoreError::Db)?;
    if named.mode.is_none() && settings.tls.mode.is_none() {
        // A key=value string's own sslmode, which tokio-postgres read.
        named.mode = Some(match config.get_ssl_mode() {
            tokio_postgres::config::SslMode::Disable => tls::SslMode::Disable,
            tokio_postgres::config::SslMode::Require => tls::SslMode::Require,
            _ => tls::SslMode::Prefer,
        });
    }
    let tls = named.or(&settings.tls).map_err(StoreError::Settings)?;
    config.ssl_mode(tls::wire_mode(tls.mode));
    if let (None, Some(p)) = (config.get_password(), &settings.password) {
        config.password(p.0.as_str());
    }
    Ok((config, tls))
}

/// The deadline of each use of a connection: the statement timeout and a
/// margin ([`DEADLINE_MARGIN`]); none without a statement timeout.
fn deadline(settings: &PoolSettings) -> Option<Duration> {
    settings.statement_timeout.map(|t| t.saturating_add(DEADLINE_MARGIN))
}

/// A pool on `url` under `settings`, waiting at most `wait` for a free
/// connection; the database it opens connections to.
pub(crate) fn open_pool(
    url: &str,
    settings: &PoolSettings,
    wait: Option<Duration>,
) -> Result<(Pool, Database), StoreError> {
    let (mut config, tls_settings) = database_config(url, settings)?;
    let tls = tls::connector(&tls_settings).map_err(StoreError::Settings)?;
    if let Some(t) = settings.connect_timeout {
        config.connect_timeout(t);
        // A host that vanishes without closing its connections (a cut
        // network, a powered-off machine) would otherwise keep a sent
        // statement waiting for the kernel's retransmissions, minutes,
        // instead of failing over.
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(t);
        }
    }
    let deadline = deadline(settings);
    if let (Some(t), Some(d)) = (settings.statement_timeout, deadline) {
        let mut options = config.get_options().map(|o| format!("{o} ")).unwrap_or_default();
        // A transaction whose client went silent (Berth gave up on it at
        // its deadline) is ended by the server too, rather than holding
        // its locks until TCP notices.
        options.push_str(&format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            t.as_millis(),
            d.as_millis()
        ));
        config.options(&options);
    }
    let manager = conn::Manager { config: config.clone(), tls: tls.clone(), deadline };
    let timeouts = Timeouts { wait, create: settings.connect_timeout, recycle: settings.connect_timeout };
    let pool = Pool::builder(manager)
        .max_size(settings.max_size)
        .timeouts(timeouts)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| StoreError::Pool(e.to_string()))?;
    Ok((pool, Database { config, tls }))
}
