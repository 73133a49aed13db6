//! HTTPS on the listener when `[api] tls_cert_file` and `tls_key_file` are
//! set: read at start (a bad file stops berthd there), read again on SIGHUP
//! (a bad file then is logged and the certificate served stays).

use anyhow::{Context, Result};
use berth_api::config::ApiConfig;
use berth_api::tls::ListenerTls;

/// The listener's certificate, when one is configured.
pub fn load(api: &ApiConfig) -> Result<Option<ListenerTls>> {
    let (Some(cert), Some(key)) = (&api.tls_cert_file, &api.tls_key_file) else { return Ok(None) };
    let tls = ListenerTls::load(cert, key).map_err(anyhow::Error::msg).context("the [api] configuration")?;
    Ok(Some(tls))
}

/// The listener's certificate, read again on every SIGHUP for as long as
/// berthd runs; `None` for plain HTTP.
pub fn start(api: &ApiConfig) -> Result<Option<ListenerTls>> {
    let tls = load(api)?;
    if let Some(tls) = &tls {
        reload_on_hangup(tls.clone());
    }
    Ok(tls)
}

fn reload_on_hangup(tls: ListenerTls) {
    tokio::spawn(async move {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            return tracing::warn!("SIGHUP cannot be caught: the certificate is read at start only");
        };
        while hangups.recv().await.is_some() {
            match tls.reload() {
                Ok(()) => tracing::info!("listener certificate read again"),
                Err(e) => tracing::warn!(error = %e, "listener certificate not read again; serving the one before"),
            }
        }
    });
}
