-- Healing: hosts an admin (or a plugin) made unusable, reservations'
-- Blazar flags, and the on_heal calls the manager owes plugins.
-- Every table here is a projection of the log.

ALTER TABLE hosts ADD COLUMN disabled boolean NOT NULL DEFAULT false;
-- Why it is unusable: "admin", or a plugin's report.
ALTER TABLE hosts ADD COLUMN disabled_reason text;

ALTER TABLE reservations ADD COLUMN missing_resources boolean NOT NULL DEFAULT false;
ALTER TABLE reservations ADD COLUMN resources_changed boolean NOT NULL DEFAULT false;
-- The retry after a host frees looks only at these.
CREATE INDEX reservations_missing ON reservations (lease_id) WHERE missing_resources;

-- One row per on_heal call owed: the manager makes it, then records it done.
CREATE TABLE heal_hooks (
    id             uuid        PRIMARY KEY,
    lease_id       uuid        NOT NULL,
    reservation_id uuid        NOT NULL,
    -- [{consumer, from, to}]: the slots moved.
    moves          jsonb       NOT NULL,
    created_at     timestamptz NOT NULL
);

-- A new on_heal call wakes the managers, as a due lease event does.
CREATE FUNCTION heal_hooks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_lease_events', (extract(epoch FROM statement_timestamp()) * 1000000)::bigint::text);
    RETURN NULL;
END $$;
CREATE TRIGGER heal_hooks_notify AFTER INSERT ON heal_hooks FOR EACH STATEMENT EXECUTE FUNCTION heal_hooks_notify();
