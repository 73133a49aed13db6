//! Renewing claims: while hooks run, their claims are renewed before they
//! expire; an event whose claim another manager has taken back is
//! abandoned here (its hook aborted).

use std::sync::Arc;

use uuid::Uuid;

use tokio::time::Instant;

use crate::clock::chrono_of;
use crate::metrics;
use crate::state::Inner;

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
                let expires = asked + ttl;
                let mut running = inner.running.lock().expect("running");
                for (id, _) in &due {
                    if kept.contains(id) {
                        if let Some(r) = running.get_mut(id) {
                            r.expires = expires;
                        }
                    } else if let Some(r) = running.remove(id) {
                        metrics::claim_lost();
                        tracing::warn!(event = %id, "claim taken back by another manager; abandoning the hook");
                        if let Some(a) = r.abort {
                            a.abort();
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing claims"),
        }
    }
}
