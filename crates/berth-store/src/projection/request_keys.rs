//! The idempotency keys of lease requests (`lease_request_keys`).

use berth_core::Event;
use deadpool_postgres::GenericClient;

use crate::StoreError;

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    let Event::LeaseRequestKeyed { caller, key, fingerprint, leases, at } = event else {
        unreachable!("not a request key event")
    };
    // A key past its day may be taken over by a new request.
    c.execute(
        "INSERT INTO lease_request_keys (caller, key, fingerprint, lease_ids, at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint,
             lease_ids = excluded.lease_ids, at = excluded.at",
        &[caller, key, fingerprint, leases, at],
    )
    .await?;
    Ok(())
}
