//! Serving the router on a listener: each connection has
//! `header_read_timeout_s` to send its request headers (a client that sends
//! half of them is cut off instead of holding a connection forever), and at
//! shutdown the listener closes and requests in flight finish. Writes go
//! out at once (`TCP_NODELAY`): a streamed answer sends its headers before
//! its body, and Nagle's algorithm would hold the body back until the
//! client acknowledged the headers, which a client delays by up to 40 ms.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use crate::config::ApiConfig;

/// Serves `app` until `shutdown` completes, then waits for the connections
/// in flight (live streams end when [`crate::log::close_streams`] is called).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    config: &ApiConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(config.header_read_timeout_s));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors and the like: pause, not spin.
                        tracing::warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "setting TCP_NODELAY");
                }
                let service = TowerToHyperService::new(app.clone());
                let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "connection closed");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
