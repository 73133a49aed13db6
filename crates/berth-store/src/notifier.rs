//! The notifier's place in the log and its role.
//!
//! One berthd at a time holds the notifier role: a session advisory lock on
//! a connection taken out of the pool for as long as the role is held, so
//! that the lock goes when the connection does (a crash, a network cut) and
//! never travels back into the pool with it (so the pool may have one
//! connection more open than its size). The others try again later.
//! The holder reads the log after its delivered cursor and moves the cursor
//! once every sink has the notification.

use berth_core::lease::LeaseRecord;
use berth_core::{Error, Event};
use uuid::Uuid;

use crate::log::{read_after, Cursor, RecordedEvent};
use crate::{Store, StoreError};

/// The key of the notifier role's advisory lock: "ntfy".
const ROLE_LOCK: i64 = 0x6e74_6679;

/// The notifier role, held while this value lives.
pub struct NotifierRole {
    client: crate::conn::Conn,
}

impl Store {
    /// Takes the notifier role if no other berthd holds it.
    pub async fn take_notifier_role(&self) -> Result<Option<NotifierRole>, Error> {
        let client = self.client().await?;
        let taken: bool = client
            .query_one("SELECT pg_try_advisory_lock($1) AS taken", &[&ROLE_LOCK])
            .await
            .map_err(StoreError::from)?
            .get("taken");
        // Taken, the connection leaves the pool: the lock must end with it.
        // Not taken, it holds nothing and goes back.
        Ok(taken.then(|| NotifierRole { client: client.take() }))
    }
}

impl NotifierRole {
    /// Where delivery stands: after this, nothing has reached every sink.
    pub async fn delivered(&self) -> Result<Cursor, Error> {
        let row = self
            .client
            .query_opt("SELECT txid::text AS txid, position FROM notifier_cursor WHERE id = 1", &[])
            .await
            .map_err(StoreError::from)?;
        Ok(row.map_or(Cursor::START, |r| {
            let txid: String = r.get("txid");
            Cursor { txid: txid.parse().unwrap_or(0), position: r.get("position") }
        }))
    }

    /// Records that everything up to `cursor` reached every sink.
    pub async fn set_delivered(&self, cursor: Cursor) -> Result<(), Error> {
        self.client
            .execute(
                "INSERT INTO notifier_cursor (id, txid, position) VALUES (1, $1::text::xid8, $2)
                 ON CONFLICT (id) DO UPDATE SET txid = excluded.txid, position = excluded.position",
                &[&cursor.txid.to_string(), &cursor.position],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(())
    }

    /// Up to `limit` events after `after` (see [`read_after`]).
    pub async fn read(&self, after: Cursor, limit: i64) -> Result<Vec<RecordedEvent>, Error> {
        Ok(read_after(&**self.client, after, limit).await?)
    }

    /// The lease as its log stood at `position`: the record of its last
    /// creation or update there, with the status it last changed to. The
    /// log keeps deleted leases, so a deletion can still say what it deleted.
    pub async fn lease_at(&self, id: Uuid, position: i64) -> Result<Option<LeaseRecord>, Error> {
        let rows = self
            .client
            .query(
                "SELECT type, data FROM log_events
                 WHERE stream = $1 AND position <= $2
                   AND type IN ('LeaseCreated', 'LeaseUpdated', 'LeaseStatusChanged', 'LeaseSplit', 'LeaseTransferred')
                 ORDER BY version",
                &[&format!("lease:{id}"), &position],
            )
            .await
            .map_err(StoreError::from)?;
        let mut lease = None;
        for row in rows {
            let event = Event::from_parts(row.get("type"), row.get("data"))
                .map_err(|e| Error::internal(format!("lease {id} in the log: {e}")))?;
            match event {
                Event::LeaseCreated { lease: l, .. }
                | Event::LeaseUpdated { lease: l, .. }
                | Event::LeaseSplit { lease: l, .. } => lease = Some(l),
                Event::LeaseTransferred { to_project, user_id, .. } => {
                    if let Some(l) = lease.as_mut() {
                        (l.project_id, l.user_id) = (to_project, user_id);
                    }
                }
                Event::LeaseStatusChanged { status, degraded, .. } => {
                    if let Some(l) = lease.as_mut() {
                        let l: &mut LeaseRecord = l;
                        l.status = status;
                        l.degraded = degraded;
                    }
                }
                _ => {}
            }
        }
        Ok(lease)
    }
}
