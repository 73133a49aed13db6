-- Idempotency keys of create requests (`POST /v1/leases`, `POST
-- /v1/os-hosts`): what a keyed request made, so that the same key from the
-- same caller gets it again instead of a second one. A projection of
-- RequestKeyed events; a key older than a day no longer counts, and a new
-- request may take it over.
CREATE TABLE request_keys (
    caller      text        NOT NULL,
    key         text        NOT NULL,
    fingerprint text        NOT NULL,
    created     uuid[]      NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (caller, key)
);
