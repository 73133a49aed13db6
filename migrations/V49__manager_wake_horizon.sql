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

-- Whether a due time must be announced now.
CREATE FUNCTION berth_due_needs_notify(due timestamptz) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (
        SELECT 1 FROM manager_wake WHERE horizon IS NOT NULL AND due >= statement_timestamp() + horizon
    )
$$;

CREATE OR REPLACE FUNCTION berth_notify_lease_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    earliest timestamptz;
BEGIN
    SELECT min(coalesce(n.retry_at, n.time)) INTO earliest FROM new_rows n WHERE n.status = 'UNDONE';
    IF earliest IS NOT NULL AND berth_due_needs_notify(earliest) THEN
        PERFORM pg_notify('berth_lease_events', (extract(epoch FROM earliest) * 1000000)::bigint::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION berth_notify_lease_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF berth_due_needs_notify(coalesce(NEW.retry_at, NEW.time)) THEN
        PERFORM pg_notify('berth_lease_events',
                          (extract(epoch FROM coalesce(NEW.retry_at, NEW.time)) * 1000000)::bigint::text);
    END IF;
    RETURN NULL;
END
$$;
