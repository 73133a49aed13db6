-- Lease event updates notify only for rows left waiting (moved, or put back
-- for a retry): claims and outcomes, the bulk of the updates, notify nobody
-- and no longer collect their rows for a statement trigger.
CREATE FUNCTION berth_notify_lease_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_lease_events',
                      (extract(epoch FROM coalesce(NEW.retry_at, NEW.time)) * 1000000)::bigint::text);
    RETURN NULL;
END
$$;

DROP TRIGGER lease_events_updated ON lease_events;
CREATE TRIGGER lease_events_updated AFTER UPDATE ON lease_events
    FOR EACH ROW WHEN (NEW.status = 'UNDONE') EXECUTE FUNCTION berth_notify_lease_event();
