-- The log: append-only. `position` is global and gap-tolerant; `txid` lets a
-- reader know which positions can no longer appear below its cursor.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE log_events (
    position    bigserial   PRIMARY KEY,
    txid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    stream      text        NOT NULL,
    version     bigint      NOT NULL,
    type        text        NOT NULL,
    data        jsonb       NOT NULL,
    meta        jsonb       NOT NULL DEFAULT '{}',
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT log_events_stream_version UNIQUE (stream, version)
);
CREATE INDEX log_events_txid_position ON log_events (txid, position);

-- The log is append-only: refuse updates and deletes outright.
CREATE FUNCTION log_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'log_events is append-only';
END $$;
CREATE TRIGGER log_events_append_only BEFORE UPDATE OR DELETE ON log_events
    FOR EACH ROW EXECUTE FUNCTION log_events_append_only();

-- Projections. Everything below is derived from log_events by replay.
CREATE TABLE resource_classes (
    name     text    PRIMARY KEY,
    standard boolean NOT NULL DEFAULT false
);

CREATE TABLE traits (
    name     text    PRIMARY KEY,
    standard boolean NOT NULL DEFAULT false
);

CREATE TABLE providers (
    uuid        uuid        PRIMARY KEY,
    name        text        NOT NULL UNIQUE,
    generation  bigint      NOT NULL DEFAULT 0,
    parent_uuid uuid        REFERENCES providers (uuid),
    root_uuid   uuid        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX providers_parent ON providers (parent_uuid);
CREATE INDEX providers_root ON providers (root_uuid);

CREATE TABLE inventories (
    provider_uuid    uuid             NOT NULL REFERENCES providers (uuid) ON DELETE CASCADE,
    resource_class   text             NOT NULL REFERENCES resource_classes (name),
    total            bigint           NOT NULL,
    reserved         bigint           NOT NULL,
    min_unit         bigint           NOT NULL,
    max_unit         bigint           NOT NULL,
    step_size        bigint           NOT NULL,
    allocation_ratio double precision NOT NULL,
    PRIMARY KEY (provider_uuid, resource_class)
);
CREATE INDEX inventories_class ON inventories (resource_class);

CREATE TABLE provider_traits (
    provider_uuid uuid NOT NULL REFERENCES providers (uuid) ON DELETE CASCADE,
    trait         text NOT NULL REFERENCES traits (name),
    PRIMARY KEY (provider_uuid, trait)
);
CREATE INDEX provider_traits_trait ON provider_traits (trait);

CREATE TABLE provider_aggregates (
    provider_uuid uuid NOT NULL REFERENCES providers (uuid) ON DELETE CASCADE,
    aggregate     uuid NOT NULL,
    PRIMARY KEY (provider_uuid, aggregate)
);
CREATE INDEX provider_aggregates_aggregate ON provider_aggregates (aggregate);

CREATE TABLE consumers (
    uuid          uuid        PRIMARY KEY,
    project_id    text        NOT NULL,
    user_id       text        NOT NULL,
    consumer_type text,
    generation    bigint      NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX consumers_project_user ON consumers (project_id, user_id);

-- An allocation holds `used` of a class on a provider over `during` = [start, end).
CREATE TABLE allocations (
    consumer_uuid  uuid      NOT NULL REFERENCES consumers (uuid),
    provider_uuid  uuid      NOT NULL REFERENCES providers (uuid),
    resource_class text      NOT NULL REFERENCES resource_classes (name),
    used           bigint    NOT NULL CHECK (used > 0),
    during         tstzrange NOT NULL CHECK (NOT isempty(during))
);
CREATE INDEX allocations_consumer ON allocations (consumer_uuid);
-- Capacity checks read only what overlaps the window being decided.
CREATE INDEX allocations_timeline ON allocations USING gist (provider_uuid, resource_class, during);

INSERT INTO resource_classes (name, standard) VALUES
    ('VCPU', true), ('MEMORY_MB', true), ('DISK_GB', true), ('PCI_DEVICE', true),
    ('SRIOV_NET_VF', true), ('NUMA_SOCKET', true), ('NUMA_CORE', true), ('NUMA_THREAD', true),
    ('NUMA_MEMORY_MB', true), ('IPV4_ADDRESS', true), ('VGPU', true), ('VGPU_DISPLAY_HEAD', true),
    ('NET_BW_EGR_KILOBIT_PER_SEC', true), ('NET_BW_IGR_KILOBIT_PER_SEC', true), ('PCPU', true),
    ('MEM_ENCRYPTION_CONTEXT', true), ('FPGA', true), ('PGPU', true),
    ('NET_PACKET_RATE_KILOPACKET_PER_SEC', true), ('NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC', true),
    ('NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC', true);
