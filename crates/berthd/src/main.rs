//! berthd: the Berth daemon. Thin wiring: configuration, logging, the
//! database, the HTTP server and the manager, and signals. It holds no rule
//! and writes no SQL: deciding is berth-core's, keeping berth-store's,
//! serving berth-api's, firing lease events berth-manager's.

#![warn(clippy::arithmetic_side_effects)]

mod config;
mod database;
mod demo;
mod dev;
mod https;
mod secrets;
mod systemd;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use berth_store::Store;
use config::Config;

/// The version and the commit built from (`build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("BERTH_COMMIT"), ")");

#[derive(Parser)]
#[command(name = "berthd", version = VERSION, about = "Berth: lease and reservation scheduler daemon")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API (and run the manager) against a configured database.
    Serve {
        /// A TOML configuration file; every setting can also come from BERTH_* variables.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Check a configuration file (and its policy file and plugin programs)
    /// as `serve` does at start, without starting or touching the database.
    CheckConfig {
        /// The TOML configuration file to check; BERTH_* variables apply as for `serve`.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Apply pending schema migrations and exit.
    Migrate {
        /// A TOML configuration file; every setting can also come from BERTH_* variables.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Rebuild every projection from the log and compare with the live tables.
    Replay {
        /// Report differences and exit 1 when there are any.
        #[arg(long)]
        verify: bool,
        /// A TOML configuration file; every setting can also come from BERTH_* variables.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// One-command local run: a project-local PostgreSQL under ./.data, demo
    /// inventory, noauth, on 127.0.0.1:8778. Other settings (`[keystone]`,
    /// say) come from BERTH_* variables as for `serve`.
    Dev {
        /// Where the local cluster lives (one `berthd dev` per directory).
        #[arg(long, default_value = ".data/pg")]
        data_dir: PathBuf,
        /// The address to serve on.
        #[arg(long, default_value = "127.0.0.1:8778")]
        listen: String,
        /// `noauth`, `keystone` (with BERTH_KEYSTONE__*) or `jwt` (with BERTH_JWT__*).
        #[arg(long, default_value = "noauth")]
        auth: berth_api::AuthMode,
    },
    /// The policy rules: every action's rule, its default and what it guards.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Start a throwaway PostgreSQL, run COMMAND with BERTH_TEST_DATABASE_URL
    /// (and BERTH_PG_URL, the server without a database) pointing at it, stop it.
    WithPostgres {
        /// The command and its arguments.
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print every rule with its default and description, as a policy file
    /// with every line commented out (as oslopolicy-sample-generator does).
    List,
    /// Check a policy file as `serve` does at start, naming the line of the first problem.
    Check {
        /// The oslo.policy YAML file.
        file: PathBuf,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Command::WithPostgres { command } = &cli.command {
        // No runtime needed, and the exit code is the command's.
        std::process::exit(dev::with_postgres(command)?);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run(cli))
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve { config } => {
            let cfg = Config::load(config.as_deref())?;
            init_logging(&cfg.log)?;
            serve(cfg).await
        }
        Command::CheckConfig { config } => {
            let cfg = Config::load(config.as_deref())?;
            log_filter(&cfg.log)?;
            check(&cfg)?;
            let name = config.as_deref().map_or_else(|| "the defaults".into(), |f| f.display().to_string());
            for line in cfg.describe_tls()? {
                println!("{line}");
            }
            println!("{name}: the configuration is valid (the database was not contacted)");
            Ok(())
        }
        Command::Migrate { config } => {
            let cfg = Config::load(config.as_deref())?;
            init_logging(&cfg.log)?;
            let store = Store::connect_with(&cfg.database_url, &cfg.one_off_pool()?)?;
            store.reach().await?;
            let n = store.migrate().await?;
            tracing::info!(applied = n, "migrations done");
            Ok(())
        }
        Command::Replay { verify, config } => {
            let cfg = Config::load(config.as_deref())?;
            init_logging(&cfg.log)?;
            let store = Store::connect_with(&cfg.database_url, &cfg.one_off_pool()?)?;
            store.reach().await?;
            let report = store.replay_verify().await?;
            println!(
                "replayed {} events in {:.3}s ({:.0} events/s)",
                report.events,
                report.elapsed.as_secs_f64(),
                report.events as f64 / report.elapsed.as_secs_f64().max(1e-9)
            );
            for d in &report.differences {
                println!(
                    "DIFFERENT {}: {} rows only live, {} rows only replayed",
                    d.table, d.only_live, d.only_replayed
                );
            }
            if report.is_clean() {
                println!("projections match the log");
                Ok(())
            } else if verify {
                std::process::exit(1)
            } else {
                Ok(())
            }
        }
        Command::Dev { data_dir, listen, auth } => dev::run(&data_dir, &listen, auth).await,
        Command::Policy { command: PolicyCommand::List } => {
            print!("{}", policy_sample());
            Ok(())
        }
        Command::Policy { command: PolicyCommand::Check { file } } => {
            let rules = rules(Some(&file))?;
            println!(
                "{}: {} rules overridden, every one known and well formed",
                file.display(),
                rules.overridden().len()
            );
            Ok(())
        }
        Command::WithPostgres { .. } => unreachable!("handled before the runtime starts"),
    }
}

/// `BERTH_LOG` as a filter; one that does not parse is refused rather than
/// silently replaced (the operator asked for something).
fn log_filter(filter: &str) -> Result<tracing_subscriber::EnvFilter> {
    let parsed = tracing_subscriber::EnvFilter::builder().parse(filter).with_context(|| {
        format!("log = {filter:?} (BERTH_LOG) is not a tracing filter, such as \"info,berth_api=debug\"")
    })?;
    // The migration library logs each migration it applies, and berthd
    // then says what was applied: once is enough, unless asked for.
    Ok(if filter.contains("refinery") { parsed } else { parsed.add_directive("refinery_core=warn".parse()?) })
}

/// Logs as JSON when stderr is not a terminal, as text when it is.
fn init_logging(filter: &str) -> Result<()> {
    use std::io::IsTerminal;
    let filter = log_filter(filter)?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if std::io::stderr().is_terminal() { builder.try_init() } else { builder.json().try_init() };
    Ok(())
}

/// What can be checked of a configuration without the database: the
/// sections, the plugin programs and the policy file.
fn check(cfg: &Config) -> Result<berth_api::Rules> {
    cfg.plugins.check().context("the [plugins] configuration")?;
    cfg.check_programs().context("the [plugins] configuration")?;
    cfg.manager.check().map_err(anyhow::Error::msg).context("the [manager] configuration")?;
    cfg.check_pool().map_err(anyhow::Error::msg).context("the database pool")?;
    cfg.api.check().map_err(anyhow::Error::msg).context("the [api] configuration")?;
    berth_notify::check(&cfg.notifications).map_err(anyhow::Error::msg).context("the [notifications] configuration")?;
    https::load(&cfg.api)?;
    rules(cfg.policy_file.as_deref())
}

pub(crate) async fn serve(cfg: Config) -> Result<()> {
    // Configuration, identity and policy are checked before anything is touched.
    let rules = Arc::new(check(&cfg)?);
    let auth = Arc::new(authenticator(&cfg).await?);
    tracing::info!(enabled = ?cfg.plugins.enabled, "resource types");
    tracing::info!(
        claim_lanes = cfg.claim_lanes(),
        cores = berth_store::commands::cores(),
        configured = cfg.claim_lanes.is_some(),
        "claim lanes"
    );
    berth_api::metrics::install(&[(berth_manager::metrics::LAG, berth_manager::metrics::LAG_BUCKETS)]);
    berth_manager::metrics::describe();
    berth_notify::metrics::describe();
    berth_api::clock::ClockWatch::describe();
    berth_store::replicas::describe();
    let pool = cfg.pool()?;
    let store = Store::connect_with(&cfg.database_url, &pool)
        .context("database URL")?
        .with_claim_lanes(cfg.claim_lanes())
        .with_claim_gather(std::time::Duration::from_micros(cfg.claim_gather_us))
        .with_cleaning_time(std::time::Duration::from_secs(u64::from(cfg.cleaning_time) * 60))
        .with_drawn_ties(true)
        .with_reclaim_lead(cfg.manager.reclaim_lead())
        .with_replicas(&cfg.read_database_urls, std::time::Duration::from_millis(cfg.max_replica_lag_ms), &pool)
        .context("read_database_urls")?;
    store.reach().await?;
    let applied = store.migrate().await.context("migrating the database")?;
    if applied > 0 {
        tracing::info!(applied, "schema migrated");
    }
    store.check_log_order().await?;
    if cfg.demo_inventory {
        demo::load_inventory(&store).await.context("the demo inventory")?;
    }
    let policy = Arc::new(berth_app::Policy::from_config(&cfg.policy).context("the [policy] configuration")?);
    let registry = Arc::new(plugins(&cfg)?);
    let state = berth_api::AppState {
        app: berth_app::App::new(store.clone(), registry.clone(), policy.clone()),
        auth,
        rules,
        clock: berth_api::clock::ClockWatch::new(cfg.clock_skew_warn_s),
        build: berth_api::Build { version: env!("CARGO_PKG_VERSION"), commit: env!("BERTH_COMMIT") },
    };
    tokio::spawn(state.clock.clone().run(state.app.clone()));
    let app = berth_api::router_with(state, cfg.api.clone());
    let listener =
        tokio::net::TcpListener::bind(&cfg.listen).await.with_context(|| format!("binding {}", cfg.listen))?;
    check_noauth_reach(&cfg, listener.local_addr()?)?;
    let https = cfg.api.tls_cert_file.is_some();
    tracing::info!(listen = %cfg.listen, auth = cfg.auth.as_str(), https, "berthd serving");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let manager = cfg.manager.enabled.then(|| {
        let m = berth_manager::Manager::new(store.clone(), registry.clone(), cfg.manager.clone())
            .with_policy(policy.clone());
        tokio::spawn(m.run(stopped(stop_rx.clone())))
    });
    // Apart from the manager, so that a slow sink never holds a lease event.
    let notifier = berth_notify::Notifier::new(store.clone(), cfg.notifications.clone())
        .map_err(anyhow::Error::msg)
        .context("the [notifications] configuration")?;
    let notifier = tokio::spawn(notifier.run(stopped(stop_rx.clone())));
    let signal = async move {
        shutdown_signal().await;
        systemd::stopping();
        let _ = stop_tx.send(true);
        berth_api::log::close_streams();
    };
    let tls = https::start(&cfg.api)?;
    systemd::ready(&cfg.listen);
    berth_api::serve(listener, app, &cfg.api, tls, signal).await?;
    if let Some(m) = manager {
        let _ = m.await;
    }
    let _ = notifier.await;
    tracing::info!("berthd stopped");
    Ok(())
}

/// The policy rules: the defaults, with the operator's file if one is given.
fn rules(file: Option<&std::path::Path>) -> Result<berth_api::Rules> {
    let Some(file) = file else { return Ok(berth_api::Rules::defaults()) };
    let yaml = std::fs::read_to_string(file).with_context(|| format!("reading the policy file {}", file.display()))?;
    let rules =
        berth_api::Rules::with_file(&yaml).map_err(|e| anyhow::anyhow!("policy file {}: {e}", file.display()))?;
    tracing::info!(file = %file.display(), overridden = ?rules.overridden(), "policy file read");
    Ok(rules)
}

async fn authenticator(cfg: &Config) -> Result<berth_api::Authenticator> {
    use berth_api::{AuthMode, Authenticator};
    Ok(match cfg.auth {
        AuthMode::Noauth => Authenticator::Noauth,
        AuthMode::Keystone => Authenticator::Keystone(Box::new(
            berth_api::auth::keystone::Keystone::new(cfg.keystone.clone()).map_err(anyhow::Error::msg)?,
        )),
        AuthMode::Jwt => Authenticator::Jwt(Box::new(
            berth_api::auth::jwt::Jwt::new(cfg.jwt.clone()).await.map_err(anyhow::Error::msg)?,
        )),
    })
}

/// noauth lets anyone be admin: served on loopback only, unless the
/// configuration says it knows better; a warning either way.
fn check_noauth_reach(cfg: &Config, bound: std::net::SocketAddr) -> Result<()> {
    if cfg.auth != berth_api::AuthMode::Noauth {
        return Ok(());
    }
    if !bound.ip().is_loopback() && !cfg.allow_insecure_noauth {
        anyhow::bail!(
            "auth = \"noauth\" lets any caller act as admin, and {bound} is reachable from other machines: \
             use auth = \"keystone\" (or \"jwt\"), listen on a loopback address, or set allow_insecure_noauth = true"
        );
    }
    tracing::warn!(listen = %bound, "auth is noauth: any caller may act as any user, admin included; for local use only");
    Ok(())
}

/// Every rule as a commented-out policy file.
fn policy_sample() -> String {
    let mut out = String::from("# Berth's policy rules and their defaults. Uncomment a rule to change it.\n\n");
    for d in berth_api::access::defaults() {
        out.push_str(&format!("# {}\n#\"{}\": \"{}\"\n\n", d.description, d.name, d.rule));
    }
    out
}

/// The compiled-in plugins and the configured external ones, keeping those
/// the configuration enables.
fn plugins(cfg: &Config) -> Result<berth_plugins::Registry> {
    let builtins = cfg.plugins.builtins().context("the [plugins] configuration")?;
    cfg.plugins.registry(builtins).context("the [plugins] configuration")
}

/// SIGTERM or Ctrl-C: stop accepting, finish what is in flight.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}
