-- Idempotency keys of lease requests: the leases a keyed `POST /v1/leases`
-- was answered with, so that the same key from the same caller gets them
-- again instead of new ones. A projection of LeaseRequestKeyed events; a key
-- older than a day no longer counts, and a new request may take it over.
CREATE TABLE lease_request_keys (
    caller      text        NOT NULL,
    key         text        NOT NULL,
    fingerprint text        NOT NULL,
    lease_ids   uuid[]      NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (caller, key)
);
