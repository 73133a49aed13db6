//! The manager's side of a loan: the reclaims due, each claimed by one
//! manager for a while (`SKIP LOCKED`: a claim never waits on another), and
//! the outcome of the plugins' `on_reclaim`, recorded by its claimer only.
//! A claim that lapses (its manager died, or the plugin's failure may pass)
//! is claimed again, with the same idempotency key.

use berth_core::time::DateMath;
use berth_core::{Error, Event, EventMeta};
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::commands::{now, record};
use crate::{Store, StoreError};

/// Loans whose reclaim is due at `$1` and not under a live claim, soonest first.
const DUE: &str = "SELECT consumer_uuid, until, lent_at FROM loans
     WHERE until <= $1 AND (reclaim = 'PENDING' OR (reclaim = 'CLAIMED' AND claim_expires <= $1))
     ORDER BY until, consumer_uuid LIMIT $2 FOR UPDATE SKIP LOCKED";

/// What the loans of `$1` held, with their consumers and providers' names.
const HELD: &str = "SELECT a.consumer_uuid, c.project_id, c.user_id, a.provider_uuid, p.name, a.resource_class, a.used
     FROM loan_allocations a JOIN consumers c ON c.uuid = a.consumer_uuid JOIN providers p ON p.uuid = a.provider_uuid
     WHERE a.consumer_uuid = ANY($1) ORDER BY a.consumer_uuid, a.ordinal";

/// A loan to reclaim through the plugins.
#[derive(Debug, Clone)]
pub struct Reclaim {
    pub consumer: Uuid,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    /// When it was due.
    pub until: DateTime<Utc>,
    /// When it was lent: with the consumer, the idempotency key's.
    pub lent_at: DateTime<Utc>,
    /// What it held: (provider, provider's name, class, amount).
    pub holds: Vec<(Uuid, String, String, i64)>,
}

impl Store {
    /// Claims up to `limit` reclaims due for manager `by`, for `ttl`.
    pub async fn claim_reclaims(&self, by: &str, ttl: Duration, limit: i64) -> Result<Vec<Reclaim>, Error> {
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            let rows = tx.query(DUE, &[&at, &limit]).await?;
            if rows.is_empty() {
                return Ok(Vec::new());
            }
            let mut due: Vec<Reclaim> = rows
                .iter()
                .map(|r| Reclaim {
                    consumer: r.get("consumer_uuid"),
                    project_id: None,
                    user_id: None,
                    until: r.get("until"),
                    lent_at: r.get("lent_at"),
                    holds: Vec::new(),
                })
                .collect();
            let ids: Vec<Uuid> = due.iter().map(|d| d.consumer).collect();
            let expires = at.saturating_plus(ttl);
            let events: Vec<Event> =
                ids.iter().map(|c| Event::ReclaimClaimed { consumer: *c, by: by.to_string(), expires, at }).collect();
            let meta = EventMeta { actor: Some(by.to_string()), ..Default::default() };
            record(tx, &meta, &events).await?;
            for r in tx.query(HELD, &[&ids]).await? {
                let consumer: Uuid = r.get("consumer_uuid");
                if let Some(d) = due.iter_mut().find(|d| d.consumer == consumer) {
                    d.project_id = Some(r.get("project_id"));
                    d.user_id = Some(r.get("user_id"));
                    d.holds.push((r.get("provider_uuid"), r.get("name"), r.get("resource_class"), r.get("used")));
                }
            }
            Ok(due)
        })
    }

    /// What is lent now, per resource class (the manager's gauge).
    pub async fn lent_now(&self) -> Result<Vec<(String, i64)>, Error> {
        let c = self.read_client().await?;
        let rows = c
            .query(
                "SELECT resource_class, sum(used)::int8 AS used FROM loan_allocations WHERE during @> now() GROUP BY 1",
                &[],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(rows.iter().map(|r| (r.get("resource_class"), r.get("used"))).collect())
    }

    /// Records how `consumer`'s reclaim went, if `by` still holds its
    /// claim; answers whether it did.
    pub async fn finish_reclaim(&self, by: &str, consumer: Uuid, done: bool, detail: Value) -> Result<bool, Error> {
        crate::tx::command!(self, |tx| {
            let row = tx
                .query_opt(
                    "SELECT 1 FROM loans WHERE consumer_uuid = $1 AND reclaim = 'CLAIMED' AND claimed_by = $2",
                    &[&consumer, &by],
                )
                .await?;
            if row.is_none() {
                return Ok(false);
            }
            let at = now(tx).await?;
            let meta = EventMeta { actor: Some(by.to_string()), ..Default::default() };
            record(tx, &meta, &[Event::ReclaimFinished { consumer, done, detail: detail.clone(), at }]).await?;
            Ok(true)
        })
    }
}
