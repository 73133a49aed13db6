-- A lease its project offers to another (POST /v1/leases/{id}/transfer by
-- a member): at most one offer per lease, until the target project accepts
-- it, the owner withdraws it, or an admin moves the lease. A projection
-- (LeaseTransferOffered, LeaseTransferWithdrawn, LeaseTransferred); a table
-- older binaries do not read.
CREATE TABLE lease_transfers (
    lease_id   uuid        PRIMARY KEY REFERENCES leases (id) ON DELETE CASCADE,
    to_project text        NOT NULL,
    offered_by text        NOT NULL,
    offered_at timestamptz NOT NULL
);
-- An accept finds the offers to the caller's project.
CREATE INDEX lease_transfers_to_project ON lease_transfers (to_project);
