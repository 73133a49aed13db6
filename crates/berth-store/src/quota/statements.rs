//! The named statements the quota check runs: the limits, the usage over
//! the windows asked about, and the lease counts.

/// The limits at the levels asked about, as (project, user) pairs with ''
/// for "none".
pub(crate) const LIMITS: &str = "SELECT l.project_id, l.user_id, l.resource, l.hard_limit
     FROM unnest($1::text[], $2::text[]) AS s(p, u)
     JOIN quota_limits l ON l.project_id = s.p AND l.user_id = s.u";

/// Per project and class asked about (with a limit somewhere), the
/// project's holds over the window asked about, in four kinds of row (as a
/// capacity check reads a provider's, see commands/allocations.rs):
/// 0. bounded holds (leases) overlapping the window, clipped to it and
///    summed by user, clipped window and the consumer being rewritten that
///    holds them (null for everyone else's);
/// 1. open-ended holds that start inside the window or after it, one by one;
/// 2. the sum of all open-ended holds, per user (project_open_usage, a row
///    per lane's stripe, added up here);
/// 3. the open-ended holds of the consumers being rewritten that began
///    before the window (read by consumer, fenced from the project's rows).
///
/// The open-ended holds that began before the window are kind 2 less kinds 1
/// and 3: one hold per user over the whole window.
///
/// The windows asked about start no earlier than `$6`, the instant the
/// command decides at, or, when it is null, the transaction's start (a
/// claim batch learns its instant in the same round trip: [`super::Check::unclocked`]);
/// those that end by then are dropped.
///
/// The statement runs on a generic plan, so its steps are fenced to keep
/// their plan whatever the statistics; the classes no limit bears on are
/// dropped first (a project without limits reads nothing).
pub(crate) const USAGE: &str = "WITH q AS MATERIALIZED (
         SELECT q.p, q.rc, greatest(q.s, f.since) AS s, q.e
         FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS q(p, rc, s, e),
              (SELECT coalesce($6::timestamptz, transaction_timestamp()) AS since) AS f
         WHERE (q.e IS NULL OR q.e > f.since)
           AND EXISTS (SELECT 1 FROM quota_limits l
                       WHERE (l.project_id = '' OR l.project_id = q.p) AND l.resource = q.rc AND l.hard_limit >= 0)),
     own AS MATERIALIZED (
         SELECT a.project_id, a.user_id, a.resource_class, a.during, a.used, a.consumer_uuid FROM allocations a
         WHERE a.consumer_uuid = ANY($5))
     SELECT 0 AS kind, a.project_id, a.user_id, q.rc AS resource_class, greatest(lower(a.during), q.s) AS start_at,
            CASE WHEN q.e IS NULL THEN upper(a.during) ELSE least(upper(a.during), q.e) END AS end_at,
            sum(a.used)::int8 AS used, CASE WHEN a.consumer_uuid = ANY($5) THEN a.consumer_uuid END AS consumer
     FROM q CROSS JOIN LATERAL (
         SELECT a.project_id, a.user_id, a.consumer_uuid, a.during, a.used FROM allocations a
         WHERE a.project_id = q.p AND a.resource_class = q.rc AND a.during && tstzrange(q.s, q.e, '[)')
           AND upper(a.during) IS NOT NULL
         OFFSET 0) AS a
     GROUP BY 2, 3, 4, 5, 6, 8
     UNION ALL
     SELECT 1, a.project_id, a.user_id, q.rc, lower(a.during), NULL, a.used, a.consumer_uuid
     FROM q CROSS JOIN LATERAL (
         SELECT a.project_id, a.user_id, a.consumer_uuid, a.during, a.used FROM allocations a
         WHERE a.project_id = q.p AND a.resource_class = q.rc AND upper(a.during) IS NULL AND lower(a.during) >= q.s
         OFFSET 0) AS a
     UNION ALL
     SELECT 2, u.project_id, u.user_id, u.resource_class, NULL, NULL, u.used, NULL
     FROM q JOIN project_open_usage u ON u.project_id = q.p AND u.resource_class = q.rc
     UNION ALL
     SELECT 3, o.project_id, o.user_id, o.resource_class, lower(o.during), NULL, o.used, o.consumer_uuid
     FROM q JOIN own o ON o.project_id = q.p AND o.resource_class = q.rc AND upper_inf(o.during)
                          AND lower(o.during) < q.s";

/// Leases not ended, per project and user.
pub(super) const LEASE_COUNTS: &str = "SELECT project_id, user_id, count(*)::int8 AS leases FROM leases
     WHERE project_id = ANY($1) AND end_at > $2 AND status NOT IN ('TERMINATED', 'TERMINATING')
     GROUP BY 1, 2";
