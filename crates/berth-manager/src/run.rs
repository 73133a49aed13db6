//! The manager's loop: sleeps until the next due time, a notification or a
//! wake-up, claims what is due, and on shutdown gives running hooks their
//! grace before the recorder writes what they did.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use berth_store::commands::Finish;
use berth_store::notify::{Notification, LEASE_EVENTS};
use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::claim::claim_due;
use crate::clock::{sleep_until_precise, Anchor};
use crate::record::record_loop;
use crate::renew::renew_loop;
use crate::state::Inner;
use crate::sweep::sweep;
use crate::Manager;

impl Manager {
    /// Runs until `shutdown` completes, then stops claiming, gives running
    /// hooks the configured grace to finish and records what they did.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let inner = self.inner;
        tracing::info!(manager = %inner.id, "manager running");
        let (finish_tx, finish_rx) = mpsc::unbounded_channel::<Finish>();
        let recorder = tokio::spawn(record_loop(inner.clone(), finish_rx));
        let renewer = tokio::spawn(renew_loop(inner.clone()));
        let mut tasks: JoinSet<()> = JoinSet::new();
        schedule(&inner, &finish_tx, &mut tasks, shutdown).await;
        tracing::info!(manager = %inner.id, running = tasks.len(), "manager stopping");
        // One grace for the hooks and the chores together.
        let grace = Instant::now() + Duration::from_millis(inner.cfg.shutdown_grace_ms);
        drain(&mut tasks, grace).await;
        chores_done(&inner, grace).await;
        drop(finish_tx);
        renewer.abort();
        let _ = recorder.await;
        tracing::info!(manager = %inner.id, "manager stopped");
    }
}

/// Claims whenever something may be due, until `shutdown` completes.
async fn schedule(
    inner: &Arc<Inner>,
    finish_tx: &mpsc::UnboundedSender<Finish>,
    tasks: &mut JoinSet<()>,
    shutdown: impl Future<Output = ()>,
) {
    let mut notes = inner.store.listen(LEASE_EVENTS);
    // Until the database knows this manager's horizon, another manager's
    // narrower one could keep a due time from notifying; each look retries.
    let mut horizon_said = false;
    let poll = inner.cfg.poll_interval();
    let debounce = inner.cfg.debounce();
    let mut next = Instant::now();
    let mut next_sweep = Instant::now();
    let mut anchor: Option<Anchor> = None;
    // Whether anything but a due time woke the loop since the last look
    // (notifications also announce `on_heal` calls owed).
    let mut noted = true;
    tokio::pin!(shutdown);
    loop {
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            note = notes.recv() => {
                noted = true;
                match note {
                    Some(note) => next = next.min(woken_at(note, anchor, debounce)),
                    // The listener is gone for good; polling still works.
                    None => notes = mpsc::channel(1).1,
                }
                continue;
            }
            _ = inner.wake.notified() => {
                next = next.min(Instant::now() + debounce);
                continue;
            }
            _ = inner.refill.notified() => {}
            _ = sleep_until_precise(next) => {}
        }
        if !horizon_said {
            horizon_said = say_wake_horizon(inner).await;
        }
        let looked = claim_due(inner, finish_tx, tasks).await;
        // A due time alone announces no `on_heal` call: at a steady stream
        // of due events, looking for them on every wake cost a query each.
        let polled = Instant::now() >= next_sweep;
        if std::mem::take(&mut noted) || polled {
            crate::heal::kick(inner);
            crate::reclaim::kick(inner);
        }
        if polled {
            next_sweep = Instant::now() + poll;
            sweep(inner);
        }
        next = Instant::now() + poll;
        // The claim statement said when the next event falls due; asked
        // apart, an event falling due between the two was in neither answer.
        let due = match looked {
            Some((due, got)) => {
                let a = Anchor::at(&due, got);
                anchor = Some(a);
                due.due.map(|t| a.instant_of(t))
            }
            None => next_due(inner, &mut anchor).await,
        };
        if let Some(due) = due {
            next = next.min(due);
        }
    }
}

/// Widens the database's wake horizon to this manager's; whether it did.
async fn say_wake_horizon(inner: &Inner) -> bool {
    match inner.store.widen_wake_horizon(inner.cfg.wake_horizon()).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "saying the manager's wake horizon");
            false
        }
    }
}

/// When a notification says to look: at the due time it carries, not
/// sooner than the debounce allows.
fn woken_at(note: Notification, anchor: Option<Anchor>, debounce: Duration) -> Instant {
    match note {
        Notification::Payload(p) => {
            let due = p.parse::<i64>().ok().and_then(DateTime::<Utc>::from_timestamp_micros);
            // Without an anchor yet, look now (the database decides what is due).
            let at = match (due, anchor) {
                (Some(due), Some(a)) => a.instant_of(due),
                _ => Instant::now(),
            };
            at.max(Instant::now() + debounce)
        }
        Notification::Connected => Instant::now() + debounce,
    }
}

/// When the next event falls due, as the database says, on the local clock
/// (refreshing `anchor`); a second from now if the database did not answer.
async fn next_due(inner: &Inner, anchor: &mut Option<Anchor>) -> Option<Instant> {
    match inner.store.next_lease_event_due().await {
        Ok(due) => {
            let a = Anchor::of(&due);
            *anchor = Some(a);
            due.due.map(|t| a.instant_of(t))
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading the next due time");
            Some(Instant::now() + Duration::from_secs(1))
        }
    }
}

/// Waits, until `grace`, for the chores under way (a sweep, a pass over
/// the `on_heal` calls owed): spawned apart from the hooks, they would
/// otherwise outlive the manager and meet a database already gone.
async fn chores_done(inner: &Inner, grace: Instant) {
    while inner.sweeping.load(Ordering::SeqCst) || inner.healing.load(Ordering::SeqCst) {
        if Instant::now() >= grace {
            tracing::warn!("chores still running at shutdown");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for running hooks until `grace`, then abandons them (their
/// claims expire and another manager takes them back).
async fn drain(tasks: &mut JoinSet<()>, grace: Instant) {
    let grace = tokio::time::sleep_until(grace);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            r = tasks.join_next() => if r.is_none() { break },
            _ = &mut grace => {
        tracing::warn!(abandoned = tasks.len(), "hooks still running at shutdown; their claims will expire");
                tasks.abort_all();
                break;
            }
        }
    }
}
