-- The manager: retries, claims, held-back hosts, and the notification that
-- wakes sleeping managers when an event becomes due earlier than they planned.

-- After a failed attempt the event is due again at retry_at (its `time`
-- stays the time the lease gave it).
ALTER TABLE lease_events ADD COLUMN retry_at timestamptz;

-- What the claim statement scans: events waiting to run, by when they are
-- due, and claims that may have expired.
CREATE INDEX lease_events_next ON lease_events ((coalesce(retry_at, time))) WHERE status = 'UNDONE';
CREATE INDEX lease_events_claims ON lease_events (claim_expires_at) WHERE status = 'IN_PROGRESS';
-- Listing events across leases, newest due first, with a marker.
CREATE INDEX lease_events_time ON lease_events (time, id);

-- Hosts held back at a lease's end (end policies `recycle` and `shared`):
-- not reservable until `until` passes or their other allocations are gone
-- (recycle), or until an admin returns them (shared, `until` NULL).
CREATE TABLE host_holds (
    provider_uuid uuid        PRIMARY KEY,
    pool          uuid        NOT NULL,
    until         timestamptz,
    lease_id      uuid        NOT NULL,
    created_at    timestamptz NOT NULL
);

-- One notification per statement that makes lease events due (created,
-- moved, or put back for a retry): its payload is the earliest due time, in
-- microseconds since the epoch. Managers sleeping past it wake up.
CREATE FUNCTION berth_notify_lease_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    earliest timestamptz;
BEGIN
    SELECT min(coalesce(n.retry_at, n.time)) INTO earliest FROM new_rows n WHERE n.status = 'UNDONE';
    IF earliest IS NOT NULL THEN
        PERFORM pg_notify('berth_lease_events', (extract(epoch FROM earliest) * 1000000)::bigint::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER lease_events_inserted AFTER INSERT ON lease_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_lease_events();
CREATE TRIGGER lease_events_updated AFTER UPDATE ON lease_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_lease_events();
