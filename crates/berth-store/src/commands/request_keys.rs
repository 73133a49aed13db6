//! Idempotency keys of create requests: the first request with a key
//! records what it made (a `RequestKeyed` event, in its own transaction);
//! the same request again within a day gets that instead of a second one;
//! another request with the key is refused.

use berth_core::error::ErrorCode;
use berth_core::{Error, Event};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::client::GenericClient;
use crate::StoreError;

/// A create request's idempotency key: whose it is, the key, and a hash of
/// the request it came with (its route and body).
#[derive(Debug, Clone)]
pub struct RequestKey {
    pub caller: String,
    pub key: String,
    pub fingerprint: String,
}

/// What a keyed create request got.
#[derive(Debug)]
pub enum Keyed<T> {
    /// Made now.
    Made(T),
    /// What an earlier request with the key made, as it is now.
    Earlier(T),
}

/// How long a request key holds.
const KEY_HOURS: i32 = 24;

/// Locks `key` (first in the lock order) and answers what an earlier
/// request with it made, if one did within the day; 409 when that request
/// was another one.
pub(crate) async fn earlier(tx: &impl GenericClient, key: &RequestKey) -> Result<Option<Vec<Uuid>>, StoreError> {
    crate::lock::request_key(tx, &key.caller, &key.key).await?;
    let row = tx
        .query_opt(
            "SELECT fingerprint, created FROM request_keys
             WHERE caller = $1 AND key = $2 AND at > now() - make_interval(hours => $3)",
            &[&key.caller, &key.key, &KEY_HOURS],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    if row.get::<_, String>("fingerprint") != key.fingerprint {
        return Err(Error::conflict(
            ErrorCode::IdempotencyKeyReused,
            format!("Idempotency-Key {} was sent before with another request", key.key),
        )
        .into());
    }
    Ok(Some(row.get("created")))
}

/// The event that records `key` as having made `created`.
pub(crate) fn made(key: &RequestKey, created: Vec<Uuid>, at: DateTime<Utc>) -> Event {
    Event::RequestKeyed {
        caller: key.caller.clone(),
        key: key.key.clone(),
        fingerprint: key.fingerprint.clone(),
        created,
        at,
    }
}
