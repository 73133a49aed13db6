//! The manager as operators see it: paused or not (and who said so), the
//! replicas seen claiming, and how many lease events are due, running and
//! failed.

use berth_core::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{Store, StoreError};

/// A manager replica, as its claims show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replica {
    /// Its name in claims (`[manager] id`).
    pub id: String,
    /// Lease events it holds in progress now.
    pub in_progress: i64,
    /// When it last claimed or finished one of the events it claimed.
    pub last_seen_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManagerState {
    pub paused: bool,
    pub changed_at: Option<DateTime<Utc>>,
    /// (user, project) who paused or resumed last.
    pub changed_by: Option<(String, String)>,
    /// Replicas holding claims now or seen claiming in the last hour.
    pub replicas: Vec<Replica>,
    /// UNDONE events whose time has come.
    pub due: i64,
    pub in_progress: i64,
    pub error: i64,
}

/// How far back a replica that holds no claim now still shows.
const SEEN_WITHIN: &str = "1 hour";

impl Store {
    pub async fn manager_state(&self) -> Result<ManagerState, Error> {
        let c = self.client().await?;
        let replicas = format!(
            "SELECT claimed_by, count(*) FILTER (WHERE status = 'IN_PROGRESS') AS in_progress,
                    max(updated_at) AS last_seen_at
             FROM lease_events
             WHERE claimed_by IS NOT NULL
               AND (status = 'IN_PROGRESS' OR updated_at > statement_timestamp() - interval '{SEEN_WITHIN}')
             GROUP BY claimed_by ORDER BY claimed_by"
        );
        let [state, replicas, counts] = crate::sql::pipeline(
            &c,
            [
                ("SELECT paused, changed_at, changed_by_user, changed_by_project FROM manager_state", &[]),
                (&replicas, &[]),
                (
                    "SELECT count(*) FILTER (WHERE status = 'UNDONE' AND coalesce(retry_at, time) <= statement_timestamp())
                              AS due,
                            count(*) FILTER (WHERE status = 'IN_PROGRESS') AS in_progress,
                            count(*) FILTER (WHERE status = 'ERROR') AS error
                     FROM lease_events WHERE status IN ('UNDONE', 'IN_PROGRESS', 'ERROR')",
                    &[],
                ),
            ],
        )
        .await
        .map_err(|e| Error::from(StoreError::from(e)))?;
        let s = state.first().ok_or_else(|| Error::internal("the manager's state has no row"))?;
        let n = counts.first().ok_or_else(|| Error::internal("no counts"))?;
        let by: (Option<String>, Option<String>) = (s.get("changed_by_user"), s.get("changed_by_project"));
        Ok(ManagerState {
            paused: s.get("paused"),
            changed_at: s.get("changed_at"),
            changed_by: by.0.zip(by.1),
            replicas: replicas
                .iter()
                .map(|r| Replica {
                    id: r.get("claimed_by"),
                    in_progress: r.get("in_progress"),
                    last_seen_at: r.get("last_seen_at"),
                })
                .collect(),
            due: n.get("due"),
            in_progress: n.get("in_progress"),
            error: n.get("error"),
        })
    }
}
