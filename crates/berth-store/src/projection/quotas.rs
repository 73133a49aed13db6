//! The quota limits projection.

use berth_core::quota::Scope;
use berth_core::Event;

use crate::client::GenericClient;
use crate::StoreError;

/// The key columns of a scope: '' stands for "none" (ids are never empty).
pub(crate) fn key(scope: &Scope) -> (&str, &str) {
    (scope.project_id.as_deref().unwrap_or(""), scope.user_id.as_deref().unwrap_or(""))
}

pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::QuotaSet { scope, limits, at } => {
            let (project, user) = key(scope);
            let resources: Vec<&str> = limits.keys().map(String::as_str).collect();
            let values: Vec<i64> = limits.values().copied().collect();
            c.execute(
                "INSERT INTO quota_limits (project_id, user_id, resource, hard_limit, updated_at)
                 SELECT $1, $2, r, v, $5 FROM unnest($3::text[], $4::int8[]) AS t(r, v)
                 ON CONFLICT (project_id, user_id, resource) DO UPDATE SET hard_limit = excluded.hard_limit,
                     updated_at = excluded.updated_at",
                &[&project, &user, &resources, &values, at],
            )
            .await?;
        }
        Event::QuotaUnset { scope, resources, .. } => {
            let (project, user) = key(scope);
            c.execute(
                "DELETE FROM quota_limits WHERE project_id = $1 AND user_id = $2
                   AND (cardinality($3::text[]) = 0 OR resource = ANY($3))",
                &[&project, &user, resources],
            )
            .await?;
        }
        // For the record only.
        Event::QuotaOverLimit { .. } => {}
        _ => unreachable!("not a quota event"),
    }
    Ok(())
}
