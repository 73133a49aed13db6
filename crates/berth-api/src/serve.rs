//! Serving the router on a listener: each connection has
//! `header_read_timeout_s` to send its request headers (a client that sends
//! half of them is cut off instead of holding a connection forever), and at
//! shutdown the listener closes and requests in flight finish. Writes go
//! out at once (`TCP_NODELAY`): a streamed answer sends its headers before
//! its body, and Nagle's algorithm would hold the body back until the
//! client acknowledged the headers, which a client delays by up to 40 ms.
//! With [`ListenerTls`], each connection's handshake comes first, within
//! the same `header_read_timeout_s`.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use crate::config::ApiConfig;
use crate::tls::ListenerTls;

/// Serves `app` until `shutdown` completes, then waits for the connections
/// in flight (live streams end when [`crate::log::close_streams`] is called).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    config: &ApiConfig,
    tls: Option<ListenerTls>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    let header_read = Duration::from_secs(config.header_read_timeout_s);
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read);
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
                let (builder, watcher) = (builder.clone(), graceful.watcher());
                let tls = tls.as_ref().map(ListenerTls::acceptor);
                tokio::spawn(async move {
                    let done = match tls {
                        None => {
                            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                            watcher.watch(connection.into_owned()).await
                        }
                        Some(acceptor) => match tokio::time::timeout(header_read, acceptor.accept(stream)).await {
                            Ok(Ok(stream)) => {
                                let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                                watcher.watch(connection.into_owned()).await
                            }
                            Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake"),
                            Err(_) => return tracing::debug!("TLS handshake timed out"),
                        },
                    };
                    if let Err(e) = done {
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
