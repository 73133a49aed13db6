//! PostgreSQL notifications, on a connection of their own (a pooled
//! connection is only read while a query runs, so it cannot wait for them).

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::{Store, StoreError};

/// The channel lease events notify on when they become due (payload: the
/// earliest due time, microseconds since the epoch).
pub const LEASE_EVENTS: &str = "berth_lease_events";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    Payload(String),
    /// The connection was (re)established: notifications sent while it was
    /// down are lost, so the listener should look again.
    Connected,
}

/// Widens the horizon past which a lease event's due time notifies nobody
/// (`manager_wake`, migration V49): never narrows it, so it stays past what
/// every manager sharing the database needs.
const WIDEN_WAKE_HORIZON: &str =
    "UPDATE manager_wake SET horizon = GREATEST(horizon, make_interval(secs => $1::float8))";

impl Store {
    /// Says that a manager looks for due events often enough to find those
    /// due `horizon` from now or later without a notification: creations
    /// and moves of such events then send none (the notification queue's
    /// lock serialises the commits of every transaction that notifies).
    pub async fn widen_wake_horizon(&self, horizon: Duration) -> Result<(), berth_core::Error> {
        let c = self.client().await?;
        c.execute(WIDEN_WAKE_HORIZON, &[&horizon.as_secs_f64()]).await.map_err(StoreError::from)?;
        Ok(())
    }

    /// Listens on `channel` until the receiver is dropped, reconnecting
    /// (with a pause) whenever the connection fails.
    pub fn listen(&self, channel: &'static str) -> mpsc::Receiver<Notification> {
        let (tx, rx) = mpsc::channel(1024);
        // The pool's settings: with several hosts and
        // `target_session_attrs=read-write`, a reconnection finds whichever
        // host is the primary now (LISTEN is refused on a standby).
        let config = self.config.clone();
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            while !tx.is_closed() {
                match listen_once(&config, channel, &tx).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(channel, error = %e, ?pause, "notification connection lost; reconnecting");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
        rx
    }
}

/// One connection's life: Ok when the receiver went away, Err when the
/// connection failed.
async fn listen_once(
    config: &crate::Database,
    channel: &str,
    tx: &mpsc::Sender<Notification>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect().await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement = format!("LISTEN {channel}");
    let listen = client.batch_execute(&statement);
    tokio::pin!(listen);
    // The connection must be driven while LISTEN runs.
    loop {
        tokio::select! {
            r = &mut listen => { r?; break; }
            m = messages.next() => match m {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    }
    if tx.send(Notification::Connected).await.is_err() {
        return Ok(());
    }
    loop {
        tokio::select! {
            m = messages.next() => match m {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(Notification::Payload(n.payload().to_string())).await.is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => {
                    // Closed by the server: treat as a failure to reconnect.
                    return client.batch_execute("SELECT 1").await;
                }
            },
            _ = tx.closed() => return Ok(()),
        }
    }
}
