//! Lease notifications in Blazar's shapes, delivered to configured sinks.
//!
//! The log is the outbox: one berthd at a time holds the notifier role
//! (berth-store `notifier`), follows the log from its delivered cursor,
//! makes the notification of each lease event Blazar would notify
//! (`blazar`) and delivers it to every sink (`sink`) with retries, then
//! moves the cursor. Lease events never wait for it. A notification may
//! arrive twice (a crash between delivery and the cursor's move), always
//! with the same `message_id`.

pub mod blazar;
pub mod config;
pub mod metrics;
pub mod sink;

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use berth_core::Error;
use berth_store::Store;

pub use config::{NotificationsConfig, SinkConfig};
use sink::Sink;

type Stopped = tokio::sync::watch::Receiver<bool>;

/// Log events read at once.
const PAGE: i64 = 200;

/// Everything that can be refused in `[notifications]` before anything runs.
pub fn check(config: &NotificationsConfig) -> Result<(), String> {
    config.check()?;
    config.sinks.iter().try_for_each(|s| Sink::new(s).map(drop))
}

pub struct Notifier {
    store: Store,
    config: NotificationsConfig,
    sinks: Vec<Sink>,
}

impl Notifier {
    pub fn new(store: Store, config: NotificationsConfig) -> Result<Notifier, String> {
        check(&config)?;
        let sinks = config.sinks.iter().map(Sink::new).collect::<Result<_, _>>()?;
        Ok(Notifier { store, config, sinks })
    }

    /// Takes the notifier role when it is free and delivers until `stop`.
    /// A stop waits for a delivery that succeeded to be recorded, so that
    /// the next holder does not send it again; one still being retried is
    /// left to the next holder.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        if self.sinks.is_empty() {
            return;
        }
        let (stopping, stopped) = tokio::sync::watch::channel(false);
        let work = self.take_turns(stopped);
        tokio::pin!(stop, work);
        tokio::select! {
            () = &mut stop => {
                let _ = stopping.send(true);
                work.await;
            }
            () = &mut work => {}
        }
    }

    async fn take_turns(&self, mut stopped: Stopped) {
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        while !*stopped.borrow() {
            if let Err(e) = self.hold_role(&mut stopped).await {
                tracing::warn!(error = %e, "notifier: will try again");
            }
            let _ = tokio::time::timeout(poll, stopped.wait_for(|s| *s)).await;
        }
    }

    /// While the role is this berthd's, delivers what the log holds past
    /// the delivered cursor. Returns when stopped, when another berthd
    /// holds the role, or on an error (the role goes with its connection).
    async fn hold_role(&self, stopped: &mut Stopped) -> Result<(), Error> {
        let Some(role) = self.store.take_notifier_role().await? else { return Ok(()) };
        tracing::info!("notifier: this berthd delivers lease notifications");
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        let mut cursor = role.delivered().await?;
        while !*stopped.borrow() {
            let page = role.read(cursor, PAGE).await?;
            if page.is_empty() {
                let _ = tokio::time::timeout(poll, stopped.wait_for(|s| *s)).await;
                continue;
            }
            for event in &page {
                if let Some(n) = blazar::notification(&role, event, &self.config.publisher_id).await? {
                    if !self.deliver(&n, stopped).await {
                        return Ok(());
                    }
                    role.set_delivered(event.cursor()).await?;
                }
                cursor = event.cursor();
            }
            role.set_delivered(cursor).await?;
        }
        Ok(())
    }

    /// Delivers `n` to every sink, each in turn, retrying with backoff;
    /// false if stopped first.
    async fn deliver(&self, n: &blazar::Notification, stopped: &mut Stopped) -> bool {
        for sink in &self.sinks {
            let refusals = std::sync::atomic::AtomicUsize::new(0);
            let backoff = ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(self.config.retry_min_ms))
                .with_max_delay(Duration::from_millis(self.config.retry_max_ms))
                .with_jitter()
                .without_max_times();
            let max_refused = self.config.max_refused_attempts;
            let outcome = (|| sink.deliver(n))
                .retry(backoff)
                .when(|f: &sink::Failure| {
                    !f.refused || refusals.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 < max_refused
                })
                .notify(|f, wait| {
                    metrics::count(metrics::FAILED, sink.kind());
                    tracing::warn!(
                        sink = sink.kind(), message_id = %n.message_id, event_type = %n.event_type,
                        error = %f.message, retry_in_ms = wait.as_millis() as u64, "notification not delivered"
                    );
                });
            let outcome = tokio::select! {
                outcome = outcome => outcome,
                _ = stopped.wait_for(|s| *s) => return false,
            };
            match outcome {
                Ok(()) => metrics::count(metrics::DELIVERED, sink.kind()),
                Err(f) => {
                    metrics::count(metrics::FAILED, sink.kind());
                    metrics::count(metrics::DROPPED, sink.kind());
                    tracing::error!(
                        sink = sink.kind(), message_id = %n.message_id, event_type = %n.event_type,
                        error = %f.message, "notification refused; given up"
                    );
                }
            }
        }
        true
    }
}
