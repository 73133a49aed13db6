//! The idempotency keys of create requests (`request_keys`).

use berth_core::Event;

use crate::client::GenericClient;
use crate::StoreError;

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    let Event::RequestKeyed { caller, key, fingerprint, created, at } = event else {
        unreachable!("not a request key event")
    };
    // A key past its day may be taken over by a new request.
    c.execute(
        "INSERT INTO request_keys (caller, key, fingerprint, created, at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint,
             created = excluded.created, at = excluded.at",
        &[caller, key, fingerprint, created, at],
    )
    .await?;
    Ok(())
}
