//! Loans (preemptible consumers' holds, `berth_core::lend`): the consumer
//! row Placement reads, the loan and its allocations, and the reclaim's
//! progress. Written only here; no other projection reads `loans`.

use berth_core::Event;

use crate::client::GenericClient;
use crate::StoreError;

/// The consumer, a new generation for it and for the providers it holds on
/// (before and after), the loan, its allocations.
const LEND: &str = "WITH c AS (
         INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at)
         VALUES ($1, $2, $3, 'PREEMPTIBLE', 1, $6, $6)
         ON CONFLICT (uuid) DO UPDATE SET project_id = excluded.project_id, user_id = excluded.user_id,
             consumer_type = excluded.consumer_type, generation = consumers.generation + 1,
             updated_at = excluded.updated_at),
     bumped AS (
         UPDATE providers SET generation = generation + 1, updated_at = greatest(updated_at, $6)
         WHERE uuid IN (SELECT unnest($7::uuid[]) UNION SELECT provider_uuid FROM loan_allocations WHERE consumer_uuid = $1)),
     gone AS (DELETE FROM loan_allocations WHERE consumer_uuid = $1)
     INSERT INTO loans (consumer_uuid, until, lead_s, lent_at, reclaim, claimed_by, claim_expires, detail)
     VALUES ($1, $4, $5, $6, 'PENDING', NULL, NULL, NULL)
     ON CONFLICT (consumer_uuid) DO UPDATE SET until = excluded.until, lead_s = excluded.lead_s,
         lent_at = excluded.lent_at, reclaim = 'PENDING', claimed_by = NULL, claim_expires = NULL, detail = NULL";

const LENT: &str = "INSERT INTO loan_allocations (consumer_uuid, provider_uuid, resource_class, used, during, ordinal)
     SELECT $1, p, rc, u, tstzrange(s, e, '[)'), o
     FROM unnest($2::uuid[], $3::text[], $4::int8[], $5::timestamptz[], $6::timestamptz[], $7::int4[]) AS a(p, rc, u, s, e, o)";

/// A returned loan: its allocations, the loan and the consumer gone.
const RETURN: &str = "WITH a AS (DELETE FROM loan_allocations WHERE consumer_uuid = $1),
          l AS (DELETE FROM loans WHERE consumer_uuid = $1)
     DELETE FROM consumers WHERE uuid = $1";

/// A loan cut short: it ends at `$2` wherever it ran later, and its reclaim is due then.
const CUT: &str = "WITH l AS (UPDATE loans SET until = $2 WHERE consumer_uuid = $1)
     UPDATE loan_allocations SET during = tstzrange(lower(during), greatest(lower(during), $2), '[)')
     WHERE consumer_uuid = $1 AND (upper_inf(during) OR upper(during) > $2) AND lower(during) < $2";

/// A cut to before a hold's start leaves nothing of it.
const CUT_EMPTY: &str = "DELETE FROM loan_allocations WHERE consumer_uuid = $1 AND lower(during) >= $2";

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::CapacityLent { consumer, project_id, user_id, allocations, until, lead_s, at } => {
            let providers: Vec<uuid::Uuid> = allocations.iter().map(|a| a.provider).collect();
            c.execute(LEND, &[consumer, project_id, user_id, until, lead_s, at, &providers]).await?;
            let classes: Vec<&str> = allocations.iter().map(|a| a.resource_class.as_str()).collect();
            let used: Vec<i64> = allocations.iter().map(|a| a.used).collect();
            let starts: Vec<_> = allocations.iter().map(|a| a.window.start).collect();
            let ends: Vec<_> = allocations.iter().map(|a| a.window.end).collect();
            let ordinals: Vec<i32> = (0..allocations.len() as i32).collect();
            c.execute(LENT, &[consumer, &providers, &classes, &used, &starts, &ends, &ordinals]).await?;
        }
        Event::LoanReturned { consumer, .. } => {
            c.execute(RETURN, &[consumer]).await?;
        }
        Event::LoanCut { consumer, until, .. } => {
            c.execute(CUT_EMPTY, &[consumer, until]).await?;
            c.execute(CUT, &[consumer, until]).await?;
        }
        Event::ReclaimClaimed { consumer, by, expires, .. } => {
            c.execute(
                "UPDATE loans SET reclaim = 'CLAIMED', claimed_by = $2, claim_expires = $3 WHERE consumer_uuid = $1",
                &[consumer, by, expires],
            )
            .await?;
        }
        Event::ReclaimFinished { consumer, done, detail, .. } => {
            let status = if *done { "DONE" } else { "ERROR" };
            c.execute(
                "UPDATE loans SET reclaim = $2, claim_expires = NULL, detail = $3 WHERE consumer_uuid = $1",
                &[consumer, &status, detail],
            )
            .await?;
        }
        _ => unreachable!("not a loan's event: {event:?}"),
    }
    Ok(())
}
