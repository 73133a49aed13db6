-- Operators' controls over the manager: whether the whole deployment's
-- managers are paused, who changed it and when (a projection of
-- ManagerPaused / ManagerResumed; one row, seeded here and by replay).
-- The claim statement reads it under a key-share lock and claims nothing
-- while paused; a pause takes the row for update, so it waits for claims
-- under way and none starts after it commits.
CREATE TABLE manager_state (
    id                 boolean     PRIMARY KEY DEFAULT true CHECK (id),
    paused             boolean     NOT NULL DEFAULT false,
    changed_at         timestamptz,
    changed_by_user    text,
    changed_by_project text
);
INSERT INTO manager_state DEFAULT VALUES;

-- A resume wakes every sleeping manager at once, as an event falling due
-- now would (the payload is the database's time, in microseconds).
CREATE FUNCTION berth_notify_manager_resumed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_lease_events', (extract(epoch FROM statement_timestamp()) * 1000000)::bigint::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER manager_state_resumed AFTER UPDATE ON manager_state
    FOR EACH ROW WHEN (OLD.paused AND NOT NEW.paused) EXECUTE FUNCTION berth_notify_manager_resumed();
