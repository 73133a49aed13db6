-- Maintenance windows (Slurm's MAINT): hosts an admin reserves for a
-- window even where leases hold them; placed nowhere over it. A projection
-- of MaintenanceScheduled / MaintenanceCancelled.
CREATE TABLE maintenance_windows (
    id            uuid        NOT NULL,
    provider_uuid uuid        NOT NULL,
    during        tstzrange   NOT NULL,
    -- Whether the leases it hits move to other hosts (else only flagged).
    heal          boolean     NOT NULL,
    reason        text,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (id, provider_uuid)
);
CREATE INDEX maintenance_windows_provider ON maintenance_windows (provider_uuid);
