//! Renewing claims: while hooks run, their claims are renewed before they
//! expire; an event whose claim another manager has taken back is
//! abandoned here (its hook aborted).

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use tokio::time::Instant;

use crate::clock::chrono_of;
use crate::metrics;
use crate::state::{Inner, Running};

/// Renews the claims of running events before they expire; aborts the work
/// on events whose claim another manager has taken back.
pub(crate) async fn renew_loop(inner: Arc<Inner>) {
    let ttl = inner.cfg.claim_ttl();
    loop {
        tokio::time::sleep(ttl / 4).await;
        let horizon = Instant::now() + ttl / 2;
        let due: Vec<(Uuid, i32)> = inner
            .running
            .lock()
            .expect("running")
            .iter()
            .filter(|(_, r)| r.expires < horizon)
            .map(|(id, r)| (*id, r.attempt))
            .collect();
        if due.is_empty() {
            continue;
        }
        let asked = Instant::now();
        match inner.store.renew_claims(&inner.id, &due, chrono_of(ttl)).await {
            Ok(kept) => {
                let mut running = inner.running.lock().expect("running");
                for lost in settle(&mut running, &due, &kept, asked + ttl) {
                    metrics::claim_lost();
                    tracing::warn!(event = %lost, "claim taken back by another manager; abandoning the hook");
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing claims"),
        }
    }
}

/// Applies a renewal's answer to the events being worked on: those `kept`
/// hold their claim until `expires`; an event asked for and not kept whose
/// hooks still run was taken back by another manager, so its hook is
/// aborted and it is forgotten (answered, to be counted). An event not
/// kept whose outcome is with the recorder is left alone: its outcome may
/// just have been recorded (which ends the claim too), and the recorder's
/// write tells the two apart.
fn settle(running: &mut HashMap<Uuid, Running>, due: &[(Uuid, i32)], kept: &[Uuid], expires: Instant) -> Vec<Uuid> {
    let mut lost = Vec::new();
    for (id, _) in due {
        let Some(r) = running.get_mut(id) else { continue };
        if kept.contains(id) {
            r.expires = expires;
        } else if !r.recording {
            if let Some(a) = running.remove(id).and_then(|r| r.abort) {
                a.abort();
            }
            lost.push(*id);
        }
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn running(recording: bool, abort: Option<tokio::task::AbortHandle>) -> Running {
        Running { attempt: 1, expires: Instant::now(), abort, recording, ended: None }
    }

    #[tokio::test]
    async fn a_claim_not_kept_is_lost_only_while_its_hooks_run() {
        let hook = tokio::spawn(std::future::pending::<()>());
        let (kept, taken, recorded) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut events = HashMap::from([
            (kept, running(false, None)),
            (taken, running(false, Some(hook.abort_handle()))),
            (recorded, running(true, None)),
        ]);
        let due = [(kept, 1), (taken, 1), (recorded, 1)];
        let expires = Instant::now() + Duration::from_secs(60);

        let lost = settle(&mut events, &due, &[kept], expires);

        assert_eq!(lost, vec![taken]);
        assert_eq!(events[&kept].expires, expires);
        assert!(!events.contains_key(&taken));
        assert!(hook.await.unwrap_err().is_cancelled(), "the hook of a claim taken back is aborted");
        // The outcome's entry stays for the recorder, which forgets it
        // (and tells the policy service of an ended lease) once written.
        assert!(events.contains_key(&recorded));
    }

    #[test]
    fn an_event_already_forgotten_is_not_counted() {
        let mut events = HashMap::new();
        let lost = settle(&mut events, &[(Uuid::new_v4(), 1)], &[], Instant::now());
        assert!(lost.is_empty());
    }
}
