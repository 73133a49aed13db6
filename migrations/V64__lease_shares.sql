-- Sharing a lease's reserved capacity with other projects. Both tables are
-- projections of the log (LeaseShared, UpdateHookFinished).

-- One row per project a lease is shared with.
CREATE TABLE lease_shares (
    lease_id   uuid NOT NULL,
    project_id text NOT NULL,
    PRIMARY KEY (lease_id, project_id)
);
-- "The leases shared with project P", for its listing and its draws.
CREATE INDEX lease_shares_project ON lease_shares (project_id, lease_id);

-- One row per on_update call owed after a started lease's sharing changed:
-- the manager makes it, then records it done.
CREATE TABLE update_hooks (
    id             uuid        PRIMARY KEY,
    lease_id       uuid        NOT NULL,
    reservation_id uuid        NOT NULL,
    created_at     timestamptz NOT NULL
);
CREATE INDEX update_hooks_lease ON update_hooks (lease_id);

-- A new on_update call wakes the managers, as an on_heal call does.
CREATE TRIGGER update_hooks_notify AFTER INSERT ON update_hooks
    FOR EACH STATEMENT EXECUTE FUNCTION heal_hooks_notify();
