-- Creations notify only what a manager could miss.
--
-- Every transaction that sends NOTIFY takes PostgreSQL's one lock on the
-- notification queue at its commit and holds it until the commit is
-- flushed: concurrent lease creations, whose events' insert notified the
-- managers, committed one behind another (the `Lock:object` wait,
-- docs/performance.md). A manager looks at least once per poll interval
-- and then learns the next due time from the database, so a due time past
-- the interval needs no notification. Each manager widens `horizon` to
-- twice its poll interval and a second (the margin covers the time between
-- an insert and its commit); due times before it notify as before. NULL,
-- until a manager has said: every due time notifies.
--
-- Runtime state, like notifier_cursor: not a projection of the log.
CREATE TABLE manager_wake (
    id      boolean  PRIMARY KEY DEFAULT true CHECK (id),
    horizon interval
);
INSERT INTO manager_wake DEFAULT VALUES;

-- The check is written out in each trigger: PL/pgSQL keeps the plan of a
-- query it runs itself, while a SQL function called from it was planned
-- anew on every call (measured: 15 % of an insert's throughput).
CREATE OR REPLACE FUNCTION berth_notify_lease_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    earliest timestamptz;
BEGIN
    SELECT min(coalesce(n.retry_at, n.time)) INTO earliest FROM new_rows n WHERE n.status = 'UNDONE';
    IF earliest IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM manager_wake WHERE earliest >= statement_timestamp() + horizon) THEN
        PERFORM pg_notify('berth_lease_events', (extract(epoch FROM earliest) * 1000000)::bigint::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION berth_notify_lease_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    due timestamptz := coalesce(NEW.retry_at, NEW.time);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM manager_wake WHERE due >= statement_timestamp() + horizon) THEN
        PERFORM pg_notify('berth_lease_events', (extract(epoch FROM due) * 1000000)::bigint::text);
    END IF;
    RETURN NULL;
END
$$;
