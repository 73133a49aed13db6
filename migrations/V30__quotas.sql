-- Quotas. `quota_limits` is a projection of the QuotaSet and QuotaUnset
-- events: one row per level and resource. The defaults have project_id = ''
-- and a project's own limits user_id = '' (ids are never empty).
CREATE TABLE quota_limits (
    project_id text        NOT NULL,
    user_id    text        NOT NULL,
    resource   text        NOT NULL,
    -- -1: unlimited, set explicitly.
    hard_limit bigint      NOT NULL CHECK (hard_limit >= -1),
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (project_id, user_id, resource)
);

-- Not a projection: one row per project that has ever had a limit bearing on
-- it, locked FOR UPDATE by every command that raises the project's usage
-- (before its consumers and providers), so that two raises of one project
-- never decide on each other's uncommitted usage. Rows are made on first use.
CREATE TABLE quota_guards (
    project_id text PRIMARY KEY
);

-- Usage is read from the allocations of a project's consumers: find them by
-- project (consumers_project_user), then their allocations by consumer.
-- Counting leases that have not ended, per project and user:
CREATE INDEX leases_project_user_end ON leases (project_id, user_id, end_at);
