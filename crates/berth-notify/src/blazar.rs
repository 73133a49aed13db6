//! Lease events of the log as the notifications Blazar sends.
//!
//! Blazar's manager sends, through oslo.messaging at priority INFO with its
//! `[notifications] publisher_id` (`blazar.lease` by default), `lease.create`,
//! `lease.update` and `lease.delete` after the API's command, and
//! `lease.event.<type>` after a lease event ran; the payload is the lease's
//! id, user, project and dates. The envelope is oslo.messaging's:
//! `message_id`, `publisher_id`, `event_type`, `priority`, `payload`,
//! `timestamp`.

use berth_core::lease::{LeaseEventStatus, LeaseRecord};
use berth_core::{Error, Event};
use berth_store::notifier::NotifierRole;
use berth_store::RecordedEvent;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

/// One notification, ready for every sink.
#[derive(Debug, Clone)]
pub struct Notification {
    pub message_id: String,
    pub event_type: String,
    pub body: Value,
}

/// The log's event types that may make a notification: others are passed
/// over without being decoded.
const NOTIFYING: &[&str] = &["LeaseCreated", "LeaseUpdated", "LeaseDeleted", "LeaseEventFinished"];

/// The notification `event` makes, if any.
pub async fn notification(
    role: &NotifierRole,
    event: &RecordedEvent,
    publisher_id: &str,
) -> Result<Option<Notification>, Error> {
    if !NOTIFYING.contains(&event.event_type.as_str()) {
        return Ok(None);
    }
    let decoded = event.event().map_err(|e| Error::internal(format!("log event {}: {e}", event.position)))?;
    let (event_type, lease) = match decoded {
        Event::LeaseCreated { lease, .. } => ("lease.create".to_string(), lease),
        Event::LeaseUpdated { lease, .. } => ("lease.update".to_string(), lease),
        // The lease as it was just before it went.
        Event::LeaseDeleted { id, .. } => match role.lease_at(id, event.position).await? {
            Some(lease) => ("lease.delete".to_string(), lease),
            None => return Ok(None),
        },
        Event::LeaseEventFinished { lease, event: id, status: LeaseEventStatus::Done, .. } => {
            let Some(lease) = role.lease_at(lease, event.position).await? else { return Ok(None) };
            let Some(e) = lease.events.iter().find(|e| e.id == id) else { return Ok(None) };
            (format!("lease.event.{}", e.event_type.as_str()), lease)
        }
        _ => return Ok(None),
    };
    Ok(Some(envelope(event.position, &event_type, &lease, event.recorded_at, publisher_id)))
}

/// The message id of the notification made at log `position`: the same on
/// every delivery of it, so receivers can drop a repeat.
pub fn message_id(position: i64) -> Uuid {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(b"berthlog");
    bytes[8..].copy_from_slice(&position.to_be_bytes());
    Uuid::new_v8(bytes)
}

fn envelope(
    position: i64,
    event_type: &str,
    lease: &LeaseRecord,
    at: DateTime<Utc>,
    publisher_id: &str,
) -> Notification {
    let message_id = message_id(position).to_string();
    let body = json!({
        "message_id": message_id,
        "publisher_id": publisher_id,
        "event_type": event_type,
        "priority": "INFO",
        "payload": {
            "lease_id": lease.id,
            "user_id": lease.user_id,
            "project_id": lease.project_id,
            "start_date": blazar_date(lease.start),
            "end_date": blazar_date(lease.end),
        },
        // oslo.messaging's form: the UTC time, a space, microseconds.
        "timestamp": at.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
    });
    Notification { message_id, event_type: event_type.to_string(), body }
}

/// A date as Blazar's payload carries it (a naive UTC datetime, ISO 8601).
fn blazar_date(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_stable_and_distinct() {
        assert_eq!(message_id(42), message_id(42));
        assert_ne!(message_id(42), message_id(43));
        assert_eq!(message_id(1).get_version_num(), 8);
    }
}
