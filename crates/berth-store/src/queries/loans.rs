//! The loans still running or due for reclaim (docs/lending.md), for the
//! operator: who borrows what where, until when, and how the reclaim went.

use std::collections::BTreeMap;

use berth_core::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Store, StoreError};

/// One loan and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Loan {
    pub consumer: Uuid,
    pub project_id: String,
    pub user_id: String,
    pub lent_at: DateTime<Utc>,
    /// When it is reclaimed; `None`: no owner needs it so far.
    pub until: Option<DateTime<Utc>>,
    /// PENDING, CLAIMED, DONE or ERROR.
    pub reclaim: String,
    /// (provider, its name) -> class -> amount.
    pub holds: BTreeMap<(Uuid, String), BTreeMap<String, i64>>,
}

/// The loans not reclaimed yet, or reclaimed in the last hour, soonest due
/// first (open-ended last), at most `$1`.
const LOANS: &str = "SELECT l.consumer_uuid, c.project_id, c.user_id, l.lent_at, l.until, l.reclaim,
            a.provider_uuid, p.name, a.resource_class, a.used
     FROM (SELECT * FROM loans
           WHERE reclaim IN ('PENDING', 'CLAIMED', 'ERROR') OR until > now() - interval '1 hour'
           ORDER BY until NULLS LAST, consumer_uuid LIMIT $1) l
     JOIN consumers c ON c.uuid = l.consumer_uuid
     LEFT JOIN loan_allocations a ON a.consumer_uuid = l.consumer_uuid
     LEFT JOIN providers p ON p.uuid = a.provider_uuid
     ORDER BY l.until NULLS LAST, l.consumer_uuid, a.ordinal";

impl Store {
    /// The loans an operator watches (see [`LOANS`]), at most `limit`.
    pub async fn loans(&self, limit: i64) -> Result<Vec<Loan>, Error> {
        let c = self.read_client().await?;
        let rows = c.query(LOANS, &[&limit]).await.map_err(StoreError::from)?;
        let mut out: Vec<Loan> = Vec::new();
        for r in rows {
            let consumer: Uuid = r.get("consumer_uuid");
            if out.last().is_none_or(|l| l.consumer != consumer) {
                out.push(Loan {
                    consumer,
                    project_id: r.get("project_id"),
                    user_id: r.get("user_id"),
                    lent_at: r.get("lent_at"),
                    until: r.get("until"),
                    reclaim: r.get("reclaim"),
                    holds: BTreeMap::new(),
                });
            }
            let loan = out.last_mut().expect("pushed above");
            if let (Some(p), Some(name), Some(class)) = (
                r.get::<_, Option<Uuid>>("provider_uuid"),
                r.get::<_, Option<String>>("name"),
                r.get::<_, Option<String>>("resource_class"),
            ) {
                *loan.holds.entry((p, name)).or_default().entry(class).or_default() += r.get::<_, i64>("used");
            }
        }
        Ok(out)
    }
}
