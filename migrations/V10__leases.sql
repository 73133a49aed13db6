-- Leases, their reservations and lease events; hosts enrolled for
-- reservation with their extra capabilities; reservation pools.
-- Every table here is a projection of the log.

-- A host: a provider enrolled in the free pool of reservable hosts.
CREATE TABLE hosts (
    provider_uuid uuid        PRIMARY KEY REFERENCES providers (uuid),
    reservable    boolean     NOT NULL,
    -- Extra capabilities, name -> JSON value as the operator gave it.
    capabilities  jsonb       NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- Names of extra capabilities; private ones are listed to admins only.
CREATE TABLE host_properties (
    name       text        PRIMARY KEY,
    private    boolean     NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE leases (
    id            uuid        PRIMARY KEY,
    name          text        NOT NULL,
    project_id    text        NOT NULL,
    user_id       text        NOT NULL,
    start_at      timestamptz NOT NULL,
    end_at        timestamptz NOT NULL,
    status        text        NOT NULL,
    degraded      boolean     NOT NULL,
    recurrence_id uuid,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    CHECK (end_at > start_at)
);
-- Listing per project, in creation order, with a marker.
CREATE INDEX leases_project_created ON leases (project_id, created_at, id);
CREATE INDEX leases_created ON leases (created_at, id);

CREATE TABLE reservations (
    id            uuid        PRIMARY KEY,
    lease_id      uuid        NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    position      int         NOT NULL,
    resource_type text        NOT NULL,
    resource_id   uuid        NOT NULL,
    status        text        NOT NULL,
    params        jsonb       NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX reservations_lease ON reservations (lease_id, position);

-- A reservation's slots: each a consumer holding resources on one provider
-- over the lease's window. `resources` is the full hold, which consumption
-- through Placement draws down and gives back.
CREATE TABLE reservation_slots (
    reservation_id uuid  NOT NULL REFERENCES reservations (id) ON DELETE CASCADE,
    consumer_uuid  uuid  NOT NULL,
    provider_uuid  uuid  NOT NULL,
    resources      jsonb NOT NULL,
    PRIMARY KEY (reservation_id, consumer_uuid)
);
CREATE INDEX reservation_slots_consumer ON reservation_slots (consumer_uuid);
CREATE INDEX reservation_slots_provider ON reservation_slots (provider_uuid);

-- The manager's work list. It claims due events with one statement
-- (FOR UPDATE SKIP LOCKED) and renews `claim_expires_at` while working.
CREATE TABLE lease_events (
    id               uuid        PRIMARY KEY,
    lease_id         uuid        NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    event_type       text        NOT NULL,
    time             timestamptz NOT NULL,
    status           text        NOT NULL,
    attempts         int         NOT NULL DEFAULT 0,
    last_error       text,
    claimed_by       text,
    claim_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    UNIQUE (lease_id, event_type)
);
CREATE INDEX lease_events_due ON lease_events (time) WHERE status IN ('UNDONE', 'IN_PROGRESS');

-- The nearest hold before and after a window, per provider, for best-fit
-- host choice: one index probe each, however many leases a provider carries.
CREATE INDEX allocations_provider_upper ON allocations (provider_uuid, upper(during));
CREATE INDEX allocations_provider_lower ON allocations (provider_uuid, lower(during));

-- Blazar's lease names are unique within a project (its client finds leases by name).
CREATE UNIQUE INDEX leases_project_name ON leases (project_id, name);
