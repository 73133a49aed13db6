//! berthd: the Berth daemon. Thin wiring: configuration, logging, the
//! database, the HTTP server and the manager, and signals.

#![warn(clippy::arithmetic_side_effects)]

mod config;
mod dev;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use berth_store::Store;
use config::Config;

#[derive(Parser)]
#[command(name = "berthd", version, about = "Berth: lease and reservation scheduler daemon")]
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
    /// Apply pending schema migrations and exit.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Rebuild every projection from the log and compare with the live tables.
    Replay {
        /// Report differences and exit 1 when there are any.
        #[arg(long)]
        verify: bool,
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// One-command local run: a project-local PostgreSQL under ./.data, demo
    /// inventory, noauth, on 127.0.0.1:8778.
    Dev {
        /// Where the local cluster lives.
        #[arg(long, default_value = ".data/pg")]
        data_dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8778")]
        listen: String,
    },
    /// Start a throwaway PostgreSQL, run COMMAND with BERTH_TEST_DATABASE_URL
    /// (and BERTH_PG_URL, the server without a database) pointing at it, stop it.
    WithPostgres {
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
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
            init_logging(&cfg.log);
            serve(cfg).await
        }
        Command::Migrate { config } => {
            let cfg = Config::load(config.as_deref())?;
            init_logging(&cfg.log);
            let store = Store::connect(&cfg.database_url, 2)?;
            let n = store.migrate().await?;
            tracing::info!(applied = n, "migrations done");
            Ok(())
        }
        Command::Replay { verify, config } => {
            let cfg = Config::load(config.as_deref())?;
            init_logging(&cfg.log);
            let store = Store::connect(&cfg.database_url, 2)?;
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
        Command::Dev { data_dir, listen } => dev::run(&data_dir, &listen).await,
        Command::WithPostgres { .. } => unreachable!("handled before the runtime starts"),
    }
}

/// Logs as JSON when stdout is not a terminal, as text when it is.
fn init_logging(filter: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if std::io::stderr().is_terminal() { builder.try_init() } else { builder.json().try_init() };
}

pub(crate) async fn serve(cfg: Config) -> Result<()> {
    cfg.plugins.check().context("the [plugins] configuration")?;
    cfg.manager.check().map_err(anyhow::Error::msg).context("the [manager] configuration")?;
    cfg.api.check().map_err(anyhow::Error::msg).context("the [api] configuration")?;
    tracing::info!(enabled = ?cfg.plugins.enabled, "resource types");
    berth_api::metrics::install(&[(berth_manager::metrics::LAG, berth_manager::metrics::LAG_BUCKETS)]);
    berth_manager::metrics::describe();
    let store =
        Store::connect_with(&cfg.database_url, &cfg.pool()).context("database URL")?.with_claim_lanes(cfg.claim_lanes);
    let applied = store.migrate().await.context("migrating the database")?;
    if applied > 0 {
        tracing::info!(applied, "schema migrated");
    }
    let policy = Arc::new(berth_plugins::Policy::from_config(&cfg.policy).context("the [policy] configuration")?);
    let registry = Arc::new(plugins(&cfg)?);
    let state = berth_api::AppState {
        store: store.clone(),
        auth: Arc::new(cfg.auth.clone()),
        plugins: registry.clone(),
        policy: policy.clone(),
    };
    let app = berth_api::router_with(state, cfg.api.clone());
    let listener =
        tokio::net::TcpListener::bind(&cfg.listen).await.with_context(|| format!("binding {}", cfg.listen))?;
    tracing::info!(listen = %cfg.listen, auth = ?cfg.auth, "berthd serving");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let manager = cfg.manager.enabled.then(|| {
        let m = berth_manager::Manager::new(store.clone(), registry.clone(), cfg.manager.clone())
            .with_policy(policy.clone());
        tokio::spawn(m.run(stopped(stop_rx.clone())))
    });
    let signal = async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
        berth_api::log::close_streams();
    };
    berth_api::serve(listener, app, &cfg.api, signal).await?;
    if let Some(m) = manager {
        let _ = m.await;
    }
    tracing::info!("berthd stopped");
    Ok(())
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
